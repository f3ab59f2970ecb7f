"""One storage target of a scenario, end to end: export, connect, disconnect, remove.

Each stack has a recipe: a short sequence of paired steps, each a context
manager that creates one thing and removes exactly that thing when the
``with`` block ends - normally, on an error, or on Ctrl-C - in reverse
order, the way blktests pairs ``_create_nvmet_port`` with
``_remove_nvmet_port``.  Every step refuses to start where an object of its
name already exists, so sanlab never reuses, changes or removes what it
did not create: other configfs exports, NVMe subsystems, sessions or files
on the host survive a run, its failure and its interruption.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass

from sanlab.scenarios.endpoints import Endpoint
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.schema import Target
from sanlab.targets import (
    backstores,
    dm_multipath,
    iscsi_initiator,
    lio,
    nvme_host,
    nvme_tls,
    nvmet,
    srp_initiator,
    tgt,
)
from sanlab.targets.faults import Cables
from sanlab.targets.host import Host, StackError
from sanlab.targets.naming import ISCSI_PORT, TGT_TCP_PORT, Chap, host_nqn, initiator_iqn, iqn, nqn

# The registry's transports that carry RDMA (iSER, SRP, NVMe/RDMA), read once when the recipes
# load: a recipe asks at each step, and the registry is fixed for the life of the process.
RDMA_TRANSPORTS = frozenset(name for name, kind in TRANSPORTS.items() if kind.rdma)


@dataclass(frozen=True)
class Wiring:
    """Where a target lives and how its initiator reaches it: two hosts, two ends of one link."""

    target_host: Host
    initiator_host: Host
    target_end: Endpoint
    initiator_end: Endpoint
    # More paths between the same two hosts (NVMe's native multipath, or
    # dm-multipath over SCSI sessions): the (target end, initiator end) of
    # each further cable.
    alternates: tuple[tuple[Endpoint, Endpoint], ...] = ()
    # Who can pull a cable as hardware would (the emulator); None: faults take
    # the interfaces down from inside the hosts instead.
    cables: Cables | None = None
    # The other initiators of a shared target, (host name, address): the
    # export admits them too.
    sharers: tuple[tuple[str, str], ...] = ()

    @property
    def admitted_iqns(self) -> list[str]:
        """The IQN of every initiator the export admits, this wiring's first."""
        return [initiator_iqn(name) for name in (self.initiator_host.name, *(n for n, _ in self.sharers))]

    @property
    def admitted_addresses(self) -> list[str]:
        """The address of every initiator the export admits (each path's), this wiring's first."""
        return [*self.initiator_addresses, *(address for _, address in self.sharers)]

    @property
    def target_address(self) -> str:
        return self.target_end.address

    @property
    def target_addresses(self) -> list[str]:
        """Where the target listens: its link's address, then each further path's."""
        return [self.target_address] + [target.address for target, _ in self.alternates]

    def ends_of(self, link: str) -> tuple[Endpoint, Endpoint]:
        """(target end, initiator end) of one of the cables between them."""
        for target, initiator in ((self.target_end, self.initiator_end), *self.alternates):
            if target.link == link:
                return target, initiator
        raise StackError(
            f"{link!r} is not a path between {self.target_host.name} and {self.initiator_host.name}"
        )

    @property
    def initiator_address(self) -> str:
        return self.initiator_end.address

    @property
    def initiator_addresses(self) -> list[str]:
        """The initiator's address on each path, in the order of ``target_addresses``."""
        return [self.initiator_address] + [initiator.address for _, initiator in self.alternates]

    @property
    def link(self) -> str:
        """The scenario's name for the cable between them."""
        return self.target_end.link


# What the export half tells the connect half (JSON-able, so that a lab can keep
# a target exported in one process and connect to it from another).
Exported = dict[str, str]
Export = Callable[[ExitStack, Target, str, Wiring, Say], Exported]
Connect = Callable[[ExitStack, Target, str, Wiring, Exported, Say], list[str]]


@dataclass(frozen=True)
class Recipe:
    """A stack's two halves: what the target host exports, and how the initiator connects."""

    export: Export
    connect: Connect


def recipe_for(target: Target) -> Recipe:
    recipe = RECIPES.get(target.stack)
    if recipe is None:
        raise StackError(f"stack {target.stack!r} cannot be emulated")
    return recipe


def exported(
    target: Target, name: str, wiring: Wiring, say: Say = lambda m: None
) -> AbstractContextManager[list[str]]:
    """Export ``target``, connect the initiator, yield its block devices, then undo it all.

    ``say`` hears about steps that needed a second try.
    """
    return _run(recipe_for(target), target, name, wiring, say)


@contextmanager
def _run(recipe: Recipe, target: Target, name: str, wiring: Wiring, say: Say) -> Iterator[list[str]]:
    with ExitStack() as steps:
        made = recipe.export(steps, target, name, wiring, say)
        yield recipe.connect(steps, target, name, wiring, made, say)


@contextmanager
def export_only(target: Target, name: str, wiring: Wiring, say: Say = lambda m: None) -> Iterator[Exported]:
    """Only the target side, undone when the block ends."""
    with ExitStack() as steps:
        yield recipe_for(target).export(steps, target, name, wiring, say)


@contextmanager
def connect_only(
    target: Target, name: str, wiring: Wiring, made: Exported, say: Say = lambda m: None
) -> Iterator[list[str]]:
    """Only the initiator side, to a target exported elsewhere; logged out when the block ends."""
    with ExitStack() as steps:
        yield recipe_for(target).connect(steps, target, name, wiring, made, say)


def _backings(steps: ExitStack, target: Target, name: str, host: Host) -> list[backstores.Backing]:
    return [
        steps.enter_context(
            backstores.backing(
                host, target.backstore, f"{name}{lun}", target.size, target.device, target.destroy
            )
        )
        for lun in range(target.luns)
    ]


def _chap(target: Target) -> Chap | None:
    return Chap(target.chap.username, target.chap.password) if target.chap else None


def _host_key(target: Target, name: str, wiring: Wiring) -> nvmet.HostKey | None:
    """With ``auth`` or ``tls``: the one host NQN admitted (and the secret it must prove)."""
    if target.auth is None and not target.tls:
        return None
    secret = target.auth.secret if target.auth else None
    return nvmet.HostKey(host_nqn(name, wiring.initiator_host.name), secret)


def _psks(target: Target) -> tuple[str, str] | None:
    """The (target's, initiator's) configured PSKs: given, or one fresh one for both."""
    if not target.tls:
        return None
    if isinstance(target.tls, bool):
        psk = nvme_tls.new_psk()
        return psk, psk
    return target.tls.psk, target.tls.initiator_psk or target.tls.psk


def nvmet_export(steps: ExitStack, target: Target, name: str, wiring: Wiring, say: Say) -> Exported:
    backings = _backings(steps, target, name, wiring.target_host)
    key, psks = _host_key(target, name, wiring), _psks(target)
    if key and psks:  # the target's keyring holds the PSK and its tlshd does the handshakes
        nvme_tls.start_tlshd(wiring.target_host)
        steps.enter_context(nvme_tls.key_inserted(wiring.target_host, key.nqn, nqn(name), psks[0]))
    steps.enter_context(
        nvmet.exported(
            wiring.target_host,
            nvmet.NvmetSettings(
                nqn(name),
                target.transport,
                tuple(wiring.target_addresses),
                tuple(backings),
                key,
                tls=psks is not None,
            ),
        )
    )
    return {"nqn": nqn(name), **({"psk": psks[1]} if psks else {})}


def nvmet_connect(
    steps: ExitStack, target: Target, name: str, wiring: Wiring, made: Exported, say: Say
) -> list[str]:
    identity = _identity(target, name, wiring)
    if identity and identity.tls:
        nvme_tls.start_tlshd(wiring.initiator_host)
        steps.enter_context(
            nvme_tls.key_inserted(wiring.initiator_host, identity.nqn, nqn(name), made["psk"])
        )
    return steps.enter_context(
        nvme_host.connected(
            wiring.initiator_host,
            nvme_host.Connection(
                nqn(name),
                target.transport,
                tuple(wiring.target_addresses),
                target.header_digest,
                target.data_digest,
                identity,
            ),
            say,
        )
    )


def _identity(target: Target, name: str, wiring: Wiring) -> nvme_host.Identity | None:
    """With ``auth`` or ``tls``: the host NQN the initiator presents, the secret it proves
    (its own, if told) and whether it asks for TLS."""
    if target.auth is None and not target.tls:
        return None
    secret = (target.auth.initiator_secret or target.auth.secret) if target.auth else None
    return nvme_host.Identity(host_nqn(name, wiring.initiator_host.name), secret, bool(target.tls))


def tgt_export(steps: ExitStack, target: Target, name: str, wiring: Wiring, say: Say) -> Exported:
    iser = target.transport in RDMA_TRANSPORTS  # iSCSI over RDMA
    backings = _backings(steps, target, name, wiring.target_host)
    steps.enter_context(
        tgt.exported(
            wiring.target_host,
            tgt.TgtSettings(
                iqn(name),
                iser,
                tuple(wiring.target_addresses),
                tuple(backings),
                tuple(wiring.admitted_addresses),
                tuple(wiring.admitted_iqns),
                _chap(target),  # an account bound to the target: no login without it (tgt.py)
            ),
        )
    )
    port = ISCSI_PORT if iser else TGT_TCP_PORT  # tgtd's TCP portal moved off 3260 (see tgt.py)
    return _portals(wiring, iqn(name), port)


def _portals(wiring: Wiring, target_iqn: str, port: int) -> Exported:
    """What an iSCSI export tells its initiator: the IQN, and a portal per path (the first one
    alone under ``portal``)."""
    portals = [f"{address}:{port}" for address in wiring.target_addresses]
    return {"iqn": target_iqn, "portal": portals[0], "portals": " ".join(portals)}


def _iscsi_login(steps: ExitStack, target: Target, wiring: Wiring, made: Exported, say: Say) -> list[str]:
    """Log in through the export's portal; through each, under dm-multipath, if it has several."""
    i = wiring.initiator_host
    session = iscsi_initiator.Session(
        made["iqn"],
        initiator_iqn(i.name),
        (target.transport in RDMA_TRANSPORTS),
        target.header_digest,
        target.data_digest,
        _chap(target),
    )
    iscsi_initiator.prepare(i, session.initiator_iqn)
    portals = made.get("portals", made["portal"]).split()
    if len(portals) == 1:
        return steps.enter_context(iscsi_initiator.logged_in(i, session, portals[0]))
    every = iscsi_initiator.logged_in_everywhere(i, session, portals, target.luns)
    return steps.enter_context(dm_multipath.joined(i, steps.enter_context(every), say))


def tgt_connect(
    steps: ExitStack, target: Target, name: str, wiring: Wiring, made: Exported, say: Say
) -> list[str]:
    return _iscsi_login(steps, target, wiring, made, say)  # iSER: a node record by hand (find_script)


def lio_export(steps: ExitStack, target: Target, name: str, wiring: Wiring, say: Say) -> Exported:
    t = wiring.target_host
    storage: list[backstores.Backing | None] = (
        [None] * target.luns  # LIO's own RAM disk (rd_mcp)
        if target.backstore == "ramdisk"
        else list(_backings(steps, target, name, t))
    )
    if target.transport == "srp":
        return _lio_srp_export(steps, target, name, wiring, storage)
    steps.enter_context(
        lio.iscsi_exported(
            t,
            lio.IscsiSettings(
                iqn(name),
                tuple(wiring.admitted_iqns),
                tuple(wiring.target_addresses),
                (target.transport in RDMA_TRANSPORTS),
                tuple(storage),
                target.size,
                target.header_digest,
                target.data_digest,
                _chap(target),
            ),
        )
    )
    return _portals(wiring, iqn(name), ISCSI_PORT)


def lio_connect(
    steps: ExitStack, target: Target, name: str, wiring: Wiring, made: Exported, say: Say
) -> list[str]:
    if target.transport == "srp":
        return _lio_srp_connect(steps, wiring, made)
    return _iscsi_login(steps, target, wiring, made, say)


def _lio_srp_export(
    steps: ExitStack, target: Target, name: str, wiring: Wiring, storage: list[backstores.Backing | None]
) -> Exported:
    here, there = wiring.target_end.rdma_device, wiring.initiator_end.rdma_device
    if here is None or there is None:
        raise StackError(f"SRP needs an RDMA device at both ends of link {wiring.link!r}")
    ids = srp_initiator.identities(wiring.initiator_host, there, wiring.initiator_address)
    guid = steps.enter_context(
        lio.srp_exported(
            wiring.target_host,
            lio.SrpSettings(name, here, wiring.target_address, tuple(ids), tuple(storage), target.size),
        )
    )
    return {"ioc_guid": guid}


def _lio_srp_connect(steps: ExitStack, wiring: Wiring, made: Exported) -> list[str]:
    device = wiring.initiator_end.rdma_device
    if device is None:
        raise StackError(f"SRP needs an RDMA device on {wiring.initiator_host.name}'s end of {wiring.link!r}")
    login = srp_initiator.logged_in(
        wiring.initiator_host,
        device,
        made["ioc_guid"],
        wiring.initiator_address,
        wiring.target_address,
    )
    return steps.enter_context(login)


def service_scripts(target: Target, name: str) -> tuple[str, str]:
    """How to stop and start again the service that serves ``target`` (a restart fault)."""
    if target.stack not in TRANSPORTS[target.transport].restartable or target.stack not in SERVICES:
        raise StackError(f"{target.stack} {target.transport}: sanlab cannot restart its service")
    stop, start, named = SERVICES[target.stack]
    return stop(named(name)), start(named(name))


def reset_script(target: Target, name: str, wiring: Wiring) -> str:
    """What the initiator runs to reset its connections to ``target`` (a reset fault): NVMe
    controllers are reset, iSCSI sessions lose their TCP connection."""
    if TRANSPORTS[target.transport].nvme:
        return nvme_host.reset_script(nqn(name))
    if not TRANSPORTS[target.transport].resettable:
        raise StackError(f"{target.stack} {target.transport}: sanlab cannot reset its connections")
    port = TGT_TCP_PORT if target.stack == "tgt" else ISCSI_PORT  # tgtd's TCP portal (see tgt.py)
    return iscsi_initiator.reset_script([f"{address}:{port}" for address in wiring.target_addresses])


# Each restartable stack's stop and start scripts, and what names its export (NQN or IQN).
SERVICES: dict[str, tuple[Callable[[str], str], Callable[[str], str], Callable[[str], str]]] = {
    "nvmet": (nvmet.stop_script, nvmet.start_script, nqn),
    "lio": (lio.stop_script, lio.start_script, iqn),
    "tgt": (lambda _: tgt.stop_script(crash=True), lambda _: tgt.start_script(), iqn),  # one tgtd per host
}


RECIPES: dict[str, Recipe] = {
    "nvmet": Recipe(nvmet_export, nvmet_connect),
    "tgt": Recipe(tgt_export, tgt_connect),
    "lio": Recipe(lio_export, lio_connect),
}

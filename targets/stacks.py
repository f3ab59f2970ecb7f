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

from sanlab.scenarios.schema import Target
from sanlab.targets import backstores, iscsi_initiator, lio, nvme_host, nvmet, srp_initiator, tgt
from sanlab.targets.host import Host, StackError
from sanlab.targets.naming import ISCSI_PORT, TGT_TCP_PORT, Chap, iqn, nqn

INITIATOR_IQN = iqn("initiator")
Say = Callable[[str], None]


@dataclass(frozen=True)
class Wiring:
    """Where a target lives and how its initiator reaches it."""

    target_host: Host
    initiator_host: Host
    target_address: str
    initiator_address: str
    rdma_device: str | None  # on both hosts: <driver>_<link>
    link: str  # the scenario's name for the cable between them


Recipe = Callable[[ExitStack, Target, str, Wiring, Say], list[str]]


def exported(
    target: Target, name: str, wiring: Wiring, say: Say = lambda m: None
) -> AbstractContextManager[list[str]]:
    """Export ``target``, connect the initiator, yield its block devices, then undo it all.

    ``say`` hears about steps that needed a second try.
    """
    recipe = RECIPES.get(target.stack)
    if recipe is None:
        raise StackError(f"stack {target.stack!r} cannot be emulated")
    return _run(recipe, target, name, wiring, say)


@contextmanager
def _run(recipe: Recipe, target: Target, name: str, wiring: Wiring, say: Say) -> Iterator[list[str]]:
    with ExitStack() as steps:
        yield recipe(steps, target, name, wiring, say)


def _backings(steps: ExitStack, target: Target, name: str, host: Host) -> list[backstores.Backing]:
    return [
        steps.enter_context(backstores.backing(host, target.backstore, f"{name}{lun}", target.size))
        for lun in range(target.luns)
    ]


def _chap(target: Target) -> Chap | None:
    return Chap(target.chap.username, target.chap.password) if target.chap else None


def nvmet_recipe(steps: ExitStack, target: Target, name: str, wiring: Wiring, say: Say) -> list[str]:
    t, i = wiring.target_host, wiring.initiator_host
    backings = _backings(steps, target, name, t)
    steps.enter_context(nvmet.exported(t, nqn(name), target.transport, wiring.target_address, backings))
    return steps.enter_context(
        nvme_host.connected(
            i,
            nqn(name),
            target.transport,
            wiring.target_address,
            target.header_digest,
            target.data_digest,
            say,
        )
    )


def tgt_recipe(steps: ExitStack, target: Target, name: str, wiring: Wiring, say: Say) -> list[str]:
    t, i = wiring.target_host, wiring.initiator_host
    iser = target.transport == "iser"
    backings = _backings(steps, target, name, t)
    address = wiring.target_address
    steps.enter_context(
        tgt.exported(t, iqn(name), iser, address, backings, wiring.initiator_address, INITIATOR_IQN)
    )
    iscsi_initiator.prepare(i, INITIATOR_IQN)
    port = ISCSI_PORT if iser else TGT_TCP_PORT  # tgtd's TCP portal moved off 3260 (see tgt.py)
    login = iscsi_initiator.logged_in(
        i,
        iqn(name),
        f"{address}:{port}",
        iser,
        target.header_digest,
        target.data_digest,
        _chap(target),
        discover=not iser,  # discovery over iSER lists nothing
    )
    return steps.enter_context(login)


def lio_recipe(steps: ExitStack, target: Target, name: str, wiring: Wiring, say: Say) -> list[str]:
    t, i = wiring.target_host, wiring.initiator_host
    storage: list[backstores.Backing | None] = (
        [None] * target.luns  # LIO's own RAM disk (rd_mcp)
        if target.backstore == "ramdisk"
        else list(_backings(steps, target, name, t))
    )
    if target.transport == "srp":
        return _lio_srp(steps, target, name, wiring, storage)
    iser = target.transport == "iser"
    digests = (target.header_digest, target.data_digest)
    steps.enter_context(
        lio.iscsi_exported(
            t,
            iqn(name),
            INITIATOR_IQN,
            wiring.target_address,
            iser,
            storage,
            target.size,
            *digests,
            _chap(target),
        )
    )
    iscsi_initiator.prepare(i, INITIATOR_IQN)
    portal = f"{wiring.target_address}:{ISCSI_PORT}"
    return steps.enter_context(iscsi_initiator.logged_in(i, iqn(name), portal, iser, *digests, _chap(target)))


def _lio_srp(
    steps: ExitStack, target: Target, name: str, wiring: Wiring, storage: list[backstores.Backing | None]
) -> list[str]:
    t, i = wiring.target_host, wiring.initiator_host
    if wiring.rdma_device is None:
        raise StackError("SRP needs an RDMA link")
    ids = srp_initiator.identities(i, wiring.rdma_device, wiring.initiator_address)
    guid = steps.enter_context(
        lio.srp_exported(t, name, wiring.rdma_device, wiring.target_address, ids, storage, target.size)
    )
    login = srp_initiator.logged_in(
        i, wiring.rdma_device, guid, wiring.initiator_address, wiring.target_address
    )
    return steps.enter_context(login)


RECIPES: dict[str, Recipe] = {"nvmet": nvmet_recipe, "tgt": tgt_recipe, "lio": lio_recipe}

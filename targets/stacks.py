"""One storage target of a scenario, end to end: export, connect, disconnect, remove.

Each stack/transport pair is a small recipe over the modules beside this
one.  ``Export`` is a context manager: whatever happens inside, the
initiator disconnects and the target is taken down again, so the next
target on the same hosts starts from a clean kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sanlab.scenarios.schema import Target
from sanlab.targets import backstores, iscsi_initiator, lio, nvme_host, nvmet, srp_initiator, tgt
from sanlab.targets.host import Host, StackError
from sanlab.targets.naming import ISCSI_PORT, TGT_TCP_PORT, iqn, nqn

INITIATOR_IQN = iqn("initiator")


@dataclass(frozen=True)
class Wiring:
    """Where a target lives and how its initiator reaches it."""

    target_host: Host
    initiator_host: Host
    target_address: str
    initiator_address: str
    rdma_device: str | None  # on both hosts: <driver>_<link>
    link: str  # the scenario's name for the cable between them


@contextmanager
def exported(
    target: Target, name: str, wiring: Wiring, say: Callable[[str], None] = lambda m: None
) -> Iterator[list[str]]:
    """Export ``target``, connect the initiator, yield its block devices, then undo it all.

    ``say`` hears about steps that needed a second try.
    """
    t, i = wiring.target_host, wiring.initiator_host
    backings: list[backstores.Backing] = []
    undo: list = []
    try:
        if target.stack == "nvmet":
            for lun in range(target.luns):
                backings.append(backstores.block_device(t, target.backstore, f"{name}{lun}", target.size))
            subsystem = nqn(name)
            nvmet.start(t, subsystem, target.transport, wiring.target_address, backings)
            undo.append(lambda: nvmet.stop(t, subsystem))
            devices = nvme_host.connect(
                i,
                subsystem,
                target.transport,
                wiring.target_address,
                target.header_digest,
                target.data_digest,
                say,
            )
            undo.append(lambda: nvme_host.disconnect(i, subsystem))
        elif target.stack == "tgt":
            for lun in range(target.luns):
                kind = "file" if target.backstore == "file" else target.backstore
                backings.append(backstores.block_device(t, kind, f"{name}{lun}", target.size))
            iser = target.transport == "iser"
            tgt.start(
                t,
                1,
                iqn(name),
                iser,
                wiring.target_address,
                backings,
                wiring.initiator_address,
                INITIATOR_IQN,
            )
            undo.append(lambda: tgt.stop_daemon(t))
            iscsi_initiator.prepare(i, INITIATOR_IQN)
            port = ISCSI_PORT if iser else TGT_TCP_PORT
            devices = iscsi_initiator.login(
                i,
                iqn(name),
                f"{wiring.target_address}:{port}",
                iser,
                target.header_digest,
                target.data_digest,
                _chap(target),
                discover=not iser,
            )
            undo.append(lambda: iscsi_initiator.logout(i, iqn(name)))
        elif target.stack == "lio":
            lio_backings: list[backstores.Backing | None] = []
            for lun in range(target.luns):
                if target.backstore == "ramdisk":
                    lio_backings.append(None)  # LIO's own rd_mcp RAM disk
                else:
                    b = backstores.block_device(t, target.backstore, f"{name}{lun}", target.size)
                    backings.append(b)
                    lio_backings.append(b)
            undo.append(lambda: lio.stop_all(t))
            if target.transport == "srp":
                if wiring.rdma_device is None:
                    raise StackError("SRP needs an RDMA link")
                ids = srp_initiator.identities(i, wiring.rdma_device, wiring.initiator_address)
                guid = lio.start_srp(
                    t, wiring.rdma_device, wiring.target_address, ids, lio_backings, target.size
                )
                devices = srp_initiator.login(
                    i, wiring.rdma_device, guid, wiring.initiator_address, wiring.target_address
                )
                undo.append(lambda: srp_initiator.logout(i))
            else:
                iser = target.transport == "iser"
                lio.start_iscsi(
                    t,
                    iqn(name),
                    INITIATOR_IQN,
                    wiring.target_address,
                    iser,
                    lio_backings,
                    target.size,
                    target.header_digest,
                    target.data_digest,
                    _chap(target),
                )
                iscsi_initiator.prepare(i, INITIATOR_IQN)
                devices = iscsi_initiator.login(
                    i,
                    iqn(name),
                    f"{wiring.target_address}:{ISCSI_PORT}",
                    iser,
                    target.header_digest,
                    target.data_digest,
                    _chap(target),
                )
                undo.append(lambda: iscsi_initiator.logout(i, iqn(name)))
        else:
            raise StackError(f"stack {target.stack!r} cannot be emulated")
        yield devices
    finally:
        for step in reversed(undo):
            step()
        for lun, backing in enumerate(backings):
            backstores.remove(t, backing, f"{name}{lun}")


def _chap(target: Target) -> lio.Chap | None:
    return lio.Chap(target.chap.username, target.chap.password) if target.chap else None

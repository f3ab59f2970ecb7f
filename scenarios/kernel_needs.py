"""What a scenario needs of a kernel's build configuration, and who needs it.

A kernel a user brings (``guest: {kernel: ...}``) is checked against this
before anything boots: each option with the part of the scenario that needs
it, so a refusal names both (``CONFIG_RDMA_SIW is not set; links[1] 'iwarp'
(rdma_driver siw) needs it``).  The facts -- which option builds which
transport's initiator and in-kernel target, which soft-RDMA driver, TLS --
are the registry's (scenarios/registry.py); this only walks a scenario.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sanlab.scenarios.parts import Target
from sanlab.scenarios.registry import (
    DM_MULTIPATH_KERNEL_OPTIONS,
    GUEST_KERNEL_OPTIONS,
    NVME_AUTH_KERNEL_OPTIONS,
    NVME_TLS_KERNEL_OPTIONS,
    RDMA_KERNEL_OPTIONS,
    SHAPING_KERNEL_OPTIONS,
    SOFT_RDMA_OPTIONS,
    STACKS,
    TRANSPORTS,
)
from sanlab.scenarios.schema import Scenario


@dataclass(frozen=True)
class Need:
    """One config option (``CONFIG_…``, built in or a module) and what in the scenario needs it."""

    option: str
    why: str


def kernel_needs(scenario: Scenario) -> list[Need]:
    """Every option the scenario's VMs need of their kernel, the first reason for each."""
    seen: dict[str, Need] = {}
    for need in _needs(scenario):
        seen.setdefault(need.option, need)
    return list(seen.values())


def _needs(scenario: Scenario) -> Iterator[Need]:
    for option in GUEST_KERNEL_OPTIONS:
        yield Need(option, "every sanlab guest (initramfs, devtmpfs, virtio NICs and console)")
    for planned in scenario.plan.links:
        where = f"links[{planned.index}] {planned.name!r}"
        if planned.rdma_driver:
            for option in (*RDMA_KERNEL_OPTIONS, SOFT_RDMA_OPTIONS[planned.rdma_driver]):
                yield Need(option, f"{where} (rdma_driver {planned.rdma_driver})")
        link = planned.link
        if link.rate or link.delay or link.loss:
            for option in SHAPING_KERNEL_OPTIONS:
                yield Need(option, f"{where} (rate, delay or loss)")
    for i, fault in enumerate(scenario.faults):
        if fault.action in ("loss", "delay"):
            for option in SHAPING_KERNEL_OPTIONS:
                yield Need(option, f"faults[{i}] (action {fault.action})")
    for i, target in enumerate(scenario.targets):
        yield from _target_needs(f"targets[{i}]", target, TRANSPORTS[target.transport].multipath)


def _target_needs(where: str, target: Target, joiner: str) -> Iterator[Need]:
    transport, stack = TRANSPORTS[target.transport], STACKS[target.stack]
    said = f"{where} ({target.transport}"
    for option in transport.kernel_options:
        yield Need(option, f"{said}: its initiator)")
    if stack.in_kernel:
        for option in (*stack.kernel_options, *transport.target_options):
            yield Need(option, f"{said} served by {target.stack})")
    if target.tls:
        for option in NVME_TLS_KERNEL_OPTIONS:
            yield Need(option, f"{where} (tls)")
    if target.auth is not None:
        for option in NVME_AUTH_KERNEL_OPTIONS:
            yield Need(option, f"{where} (auth)")
    if target.paths and joiner == "dm-multipath":
        for option in DM_MULTIPATH_KERNEL_OPTIONS:
            yield Need(option, f"{where} (paths, joined by dm-multipath)")
    if target.backstore == "null":
        yield Need("CONFIG_BLK_DEV_NULL_BLK", f"{where} (backstore null)")

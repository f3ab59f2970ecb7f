"""The software's costs: what each storage stack spends, in cycles, per I/O and per byte.

A cost belongs to the software that spends it, not to a machine, so these live apart from the
hardware profile (models/core/profile.py) and are shared by every profile through
models/stacks.yaml.  ``sanlab calibrate`` fits them; models/core/profile_files.py reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.registry import MODEL_STACKS
from sanlab.scenarios.schema import Stack

if TYPE_CHECKING:
    from sanlab.models.core.profile import Host, Profile


class Strict(BaseModel):
    # NaN and infinity are no measure of a machine; every figure below also has a physical range,
    # so that a profile of ``ghz: 1e308`` is one line, not 0 IOPS and a 130-digit latency.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# The widest a real part goes, with room to spare: bounds against nonsense, not against hardware.
KCYCLES_MAX = 10_000.0  # per I/O: ten million cycles
CYCLES_PER_BYTE_MAX = 100.0
US_MAX = 1e6  # a second


class StackCost(Strict):
    """CPU cycles one storage stack spends on an I/O, on each side.

    ``target_*`` is spent on the connection's (or queue's) serving thread,
    ``initiator_*`` on top of the application's own per-I/O work.  The
    per-byte costs are paid for the data a side receives (a read's on the
    initiator, a write's on the target): receivers copy, senders do not.
    """

    target_kcycles_per_io: float = Field(ge=0, le=KCYCLES_MAX)
    target_cycles_per_byte: float = Field(0.0, ge=0, le=CYCLES_PER_BYTE_MAX)
    initiator_kcycles_per_io: float = Field(ge=0, le=KCYCLES_MAX)
    initiator_cycles_per_byte: float = Field(0.0, ge=0, le=CYCLES_PER_BYTE_MAX)
    calibrated_on: str = ""


class SideCost(Strict):
    """What one side's software spends on an I/O: cycles per I/O and per data byte it receives."""

    kcycles_per_io: float = Field(0.0, ge=0, le=KCYCLES_MAX)
    cycles_per_byte: float = Field(0.0, ge=0, le=CYCLES_PER_BYTE_MAX)


class Digests(Strict):
    """What CRC32C costs each stack's code per byte it digests (iSCSI and NVMe/TCP digests).

    The CRC instruction is fast (``Host.crc32c_cycles_per_byte``, what a library
    on whole buffers reaches); Linux's stacks run it through the crypto API one
    socket fragment at a time, as a second pass after the copy, which costs
    several times more (models/stacks.yaml gives the measurement).
    """

    kernel_cycles_per_byte: float = Field(ge=0.05, le=5, description="Linux's stacks, per byte digested")
    library: list[Stack] = Field(
        default_factory=list,
        description="target stacks that call an optimised CRC32C library on whole buffers (the host's rate)",
    )

    def cycles_per_byte(self, stack: str, host: Host) -> float:
        """Cycles per byte digested by ``stack`` on ``host`` (its plain clock: CRC does not scale by core)."""
        return host.crc32c_cycles_per_byte if stack in self.library else self.kernel_cycles_per_byte


class Tls(Strict):
    """What TLS 1.3's AEAD (AES-GCM) costs per byte a side encrypts or decrypts (NVMe/TCP's
    secure channel, kTLS); models/stacks.yaml gives the source."""

    cycles_per_byte: float = Field(ge=0.05, le=10, description="AEAD cost per byte sent or received")


class Interrupts(Strict):
    """What one completion interrupt costs the core it lands on: the hard IRQ, the softirq that
    takes the completions, and waking the thread that sleeps on them (models/core/hostcpu.py)."""

    kcycles: float = Field(ge=0, le=200, description="per interrupt, Skylake-equivalent kcycles")


class Stacks(Strict):
    """The software stacks' costs (models/stacks.yaml), shared by every profile.

    A cost belongs to the software that spends it, not to a machine: the
    application and block layer, Linux's initiator for each transport, and
    each target stack.  In cycles, so they carry across CPUs by clock.
    """

    application: SideCost
    initiators: dict[str, SideCost]
    targets: dict[str, SideCost] = Field(description="'stack/transport'")
    digests: Digests
    tls: Tls
    interrupts: Interrupts
    calibration: dict[str, Any] = Field(default_factory=dict)

    def cost(self, key: str) -> StackCost:
        """The combined cost of target stack ``key`` ('stack/transport') and its transport's initiator."""
        target, initiator = self.targets[key], self.initiators.get(key.split("/")[1], SideCost())
        return StackCost(
            target_kcycles_per_io=target.kcycles_per_io,
            target_cycles_per_byte=target.cycles_per_byte,
            initiator_kcycles_per_io=initiator.kcycles_per_io,
            initiator_cycles_per_byte=initiator.cycles_per_byte,
            calibrated_on="stacks",
        )


def stack_cost(profile: Profile, stack: str, transport: str) -> StackCost:
    """The costs of ``stack/transport``, or of its stand-in stack's (the registry's ``stand_in``)."""
    kind = MODEL_STACKS.get(stack)
    for candidate in (stack, kind.stand_in if kind and kind.stand_in else stack):
        cost = profile.costs.get(f"{candidate}/{transport}")
        if cost is not None:
            return cost
    known = sorted(profile.costs)
    raise ScenarioError(
        [
            Problem(
                f"profile {profile.name}",
                "costs",
                f"no costs for {stack}/{transport} (has {', '.join(known)})",
            )
        ]
    )

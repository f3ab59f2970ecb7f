"""The software's costs: what each storage stack spends, in cycles, per I/O and per byte.

A cost belongs to the software that spends it, not to a machine, so these live apart from the
hardware profile (models/core/profile.py) and are shared by every profile through
models/stacks.yaml.  ``sanlab calibrate`` fits them; models/core/profile_files.py reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sanlab.models.core.paths import STACKS as MEASURED_STACKS
from sanlab.models.core.paths import default_stack_path
from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.registry import MODEL_STACKS, TRANSPORTS
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
BUSY_CORES_MAX = 100_000.0  # cores of one host


# Costs from the code sanlab runs (issue #46): where the path table (models/data/paths) counts a
# side's transport code, its per-I/O cost is those instructions × the cycles per instruction of
# its family, fitted on the published tables; the TCP stacks and the RDMA stacks are two families.
Family = Literal["kernel-tcp", "kernel-rdma"]


def family(transport: str) -> Family:
    """The CPI family of a transport's code: its stacks over TCP, or over verbs."""
    return "kernel-rdma" if TRANSPORTS[transport].rdma else "kernel-tcp"


class Paths(Strict):
    """stacks.yaml's ``paths``: the cycles per instruction of each family, a figure that carries
    what a transport's own code costs per I/O beyond its count (wake-ups, slab, cache misses it
    causes), not a hardware CPI.  ``sanlab calibrate`` fits both."""

    cpi: dict[Family, Annotated[float, Field(gt=0, le=100)]]


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
    # The family whose CPI prices a side's per-I/O cost (its path × CPI); None where the cost is
    # fitted, or a profile's own (models/core/uncertainty.py scales a CPI's sides by this).
    initiator_family: Family | None = None
    target_family: Family | None = None


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


class Contention(Strict):
    """What an I/O's host work grows by as more of the host's cores run the I/O path at once.

    Linux's block layer and NVMe queues are per CPU, but every I/O still
    touches some lines all cores share (a namespace's or a subsystem's
    counters, a NIC's queue locks, the allocator); each other busy core adds a
    wait on them (models/core/contention.py).  Costs fitted to the published
    tables already carry what their rows' busy cores spent so: the cost grows
    only past the busiest host a fitted row had (``initiator_from``,
    ``target_from``: written by ``sanlab calibrate --write`` in
    stacks.fit.yaml as ``busy_cores``).
    """

    cycles_per_busy_core: float = Field(
        ge=0, le=100_000, description="per I/O, per busy core past the fitted"
    )
    # Unrecorded (a fit that is being made, or one written before contention was): never, so a
    # fit's own rows carry their contention in the costs it fits.
    initiator_from: float = Field(
        BUSY_CORES_MAX, ge=1, le=BUSY_CORES_MAX, description="busiest fitted initiator"
    )
    target_from: float = Field(BUSY_CORES_MAX, ge=1, le=BUSY_CORES_MAX, description="busiest fitted target")

    def start(self, side: str) -> float:
        """Busy cores on ``side`` ('initiator' or 'target') past which an I/O pays for contention."""
        return self.initiator_from if side == "initiator" else self.target_from


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
    contention: Contention
    paths: Paths | None = None
    calibration: dict[str, Any] = Field(default_factory=dict)

    def cost_keys(self) -> list[str]:
        """Every 'stack/transport' with a cost: the fitted ones, and each stack sanlab runs on each
        transport it serves (LIO, tgt, nvmet), priced by the path table where it measured them."""
        runs = {f"{s}/{t}" for t, tr in TRANSPORTS.items() for s in tr.stacks if s in MEASURED_STACKS}
        return sorted(set(self.targets) | {k for k in runs if self._fitted(k) is not None})

    def _fitted(self, key: str) -> tuple[str, SideCost] | None:
        """A target's fitted cost: its own, else its stand-in stack's (the registry's ``stand_in``)."""
        stack, transport = key.split("/")
        kind = MODEL_STACKS.get(stack)
        for candidate in (key, f"{kind.stand_in}/{transport}" if kind and kind.stand_in else key):
            if candidate in self.targets:
                return candidate, self.targets[candidate]
        return None

    def cost(self, key: str) -> StackCost:
        """The combined cost of target stack ``key`` ('stack/transport') and its transport's
        initiator: per I/O, path × CPI for each side the path table measures, else fitted."""
        stack, transport = key.split("/")
        found = self._fitted(key)
        if found is None:
            raise KeyError(key)
        lender, target = found
        initiator = self.initiators.get(transport, SideCost())
        init_k, init_fam, init_note = self._priced(transport, None, initiator.kcycles_per_io, "fitted")
        fitted = "fitted" if lender == key else f"fitted, {lender}'s"
        tgt_k, tgt_fam, tgt_note = self._priced(transport, stack, target.kcycles_per_io, fitted)
        return StackCost(
            target_kcycles_per_io=tgt_k,
            target_cycles_per_byte=target.cycles_per_byte,
            initiator_kcycles_per_io=init_k,
            initiator_cycles_per_byte=initiator.cycles_per_byte,
            calibrated_on=f"stacks; per I/O, initiator: {init_note}; target: {tgt_note}",
            initiator_family=init_fam,
            target_family=tgt_fam,
        )

    def _priced(
        self, transport: str, stack: str | None, fitted: float, how: str
    ) -> tuple[float, Family | None, str]:
        """A side's kcycles per I/O, its CPI family, and where the figure comes from: the path
        table's instructions × the family's CPI, else ``fitted`` and why (the table lacks it)."""
        if self.paths is None or transport not in TRANSPORTS or (stack and stack not in MEASURED_STACKS):
            return fitted, None, how
        side = "target" if stack else "initiator"
        path = default_stack_path(transport, side, stack)
        if path is None:
            what = f"{stack}/{transport}" if stack else f"{transport}'s initiator"
            return fitted, None, f"{how}: the path table has no 4 KiB cell of {what}"
        fam = family(transport)
        cpi = self.paths.cpi[fam]
        return cpi * path.kinstr, fam, f"path {path.kinstr:.2f} k instructions x CPI {cpi:.2f} ({fam})"


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

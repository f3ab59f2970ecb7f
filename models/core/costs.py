"""The software's costs: what each storage stack spends, in cycles, per I/O and per byte.

A cost belongs to the software that spends it, not to a machine, so these live apart from the
hardware profile (models/core/profile.py) and are shared by every profile through
models/stacks.yaml.  ``sanlab calibrate`` fits them; models/core/profile_files.py reads them.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sanlab.models.core.paths import PathCell, PathTable, load_paths
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
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


# --- Costs from the code sanlab runs: path length × cycles per instruction (issue #46) -----------
# The groups of models/data/paths/path-lengths.csv that make a side's per-I/O cost: fio and the
# block layer (the application's), and the transport with its RDMA core.  The target's backend
# is the profile's (``Backend``: the guest's RAM disk is no bench's device).  The host's other
# groups are not read per I/O: TCP/IP is per frame (``tcpip``, ``Stacks.packet_kcycles``);
# copy is per byte (the fitted ``cycles_per_byte``); sched, irq, mm and the rest of the kernel
# cannot be told apart from the soft RNIC's on RDMA transports without call graphs, so the CPI
# fitted on the published tables carries them (models/README.md).
APP_GROUPS = ("app", "block")
STACK_GROUPS = ("transport", "rdma_core")
# The cells a per-I/O cost is read from: 4 KiB (least per-byte work) at QD 1 (no batching).
PATH_BS, PATH_QD = 4096, 1
RWS = ("randread", "randwrite")
Family = Literal["kernel-tcp", "kernel-rdma", "tcpip"]


def family(transport: str) -> Family:
    """The CPI family of a transport's kernel code: its stacks over TCP, or over verbs."""
    return "kernel-rdma" if TRANSPORTS[transport].rdma else "kernel-tcp"


class Paths(Strict):
    """stacks.yaml's ``paths``: cycles per instruction of each family of code the path table
    measures, fitted to the published tables (``sanlab calibrate``), and the transports whose
    cells the fit was made on: a transport measured since joins when the fit is run again, so
    a new cell in the table never leaves the committed fit stale."""

    cpi: dict[Family, Annotated[float, Field(gt=0, le=50)]]
    transports: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _known(self) -> Paths:
        unknown = [t for t in self.transports if t not in TRANSPORTS]
        if unknown:
            raise ValueError(f"transports: {unknown[0]!r} is not one of {', '.join(TRANSPORTS)}")
        return self


class SidePath(Strict):
    """One side's per-I/O work from the path table: thousands of instructions per I/O by rw
    (fio and the block layer apart from the transport's), and the CPI of its family."""

    family: Family
    cpi: float = Field(gt=0, le=50)
    app_kinstr: dict[str, Annotated[float, Field(ge=0, le=KCYCLES_MAX)]] = Field(default_factory=dict)
    stack_kinstr: dict[str, Annotated[float, Field(ge=0, le=KCYCLES_MAX)]]

    def kcycles(self, rw: str, app: bool = False) -> float:
        """kcycles per I/O of ``rw`` (a mix: its reads' and writes' mean; a missing rw: the other's)."""
        table = self.app_kinstr if app else self.stack_kinstr
        wanted = [r for r in RWS if r[4:] in rw or "rw" in rw] or list(RWS)
        found = [table[r] for r in wanted if r in table] or list(table.values())
        return self.cpi * sum(found) / len(found) if found else 0.0


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
    # Where the path table measures a side's code, its per-I/O cost is path × CPI and the
    # ``*_kcycles_per_io`` above is not used (``SidePath``).
    initiator_path: SidePath | None = None
    target_path: SidePath | None = None

    def app_kcycles(self, rw: str, host_kcycles: float) -> float:
        """fio and the block layer per I/O: the path's, else the host's ``app_kcycles_per_io``."""
        path = self.initiator_path
        return path.kcycles(rw, app=True) if path and path.app_kinstr else host_kcycles

    def initiator_kcycles(self, rw: str) -> float:
        """The initiator's transport per I/O of ``rw``: path × CPI where measured, else fitted."""
        path = self.initiator_path
        return path.kcycles(rw) if path else self.initiator_kcycles_per_io

    def target_kcycles(self, rw: str) -> float:
        """The target stack's per I/O of ``rw``: path × CPI where measured, else fitted."""
        return self.target_path.kcycles(rw) if self.target_path else self.target_kcycles_per_io


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
    paths: Paths | None = None
    calibration: dict[str, Any] = Field(default_factory=dict)

    def cost_keys(self) -> list[str]:
        """Every 'stack/transport' with a cost: the fitted ones, and each kernel target the path
        table measures whose stand-in (the registry's ``stand_in``) lends it per-byte costs."""
        measured = {f"{c.stack}/{c.transport}" for c in _table().cells()} if self.paths else set()
        return sorted(set(self.targets) | {k for k in measured if self._fitted(k) is not None})

    def _fitted(self, key: str) -> SideCost | None:
        stack, transport = key.split("/")
        kind = MODEL_STACKS.get(stack)
        lender = f"{kind.stand_in}/{transport}" if kind and kind.stand_in else key
        return self.targets.get(key, self.targets.get(lender))

    def cost(self, key: str) -> StackCost:
        """The combined cost of target stack ``key`` ('stack/transport') and its transport's
        initiator: path × CPI for each side the path table measures, the fitted kcycles else."""
        stack, transport = key.split("/")
        target, initiator = self._fitted(key), self.initiators.get(transport, SideCost())
        if target is None:
            raise KeyError(key)
        return StackCost(
            target_kcycles_per_io=target.kcycles_per_io,
            target_cycles_per_byte=target.cycles_per_byte,
            initiator_kcycles_per_io=initiator.kcycles_per_io,
            initiator_cycles_per_byte=initiator.cycles_per_byte,
            calibrated_on="stacks",
            initiator_path=self.side_path(transport, None),
            target_path=self.side_path(transport, stack),
        )

    def side_path(self, transport: str, stack: str | None) -> SidePath | None:
        """The initiator's (``stack`` None) or target ``stack``'s per-I/O path for ``transport``
        at 4 KiB QD 1, averaged over the soft RNICs that carried it; None where not measured."""
        if not self.paths or transport not in self.paths.transports:
            return None
        table, side = _table(), "target" if stack else "initiator"
        cells = [
            c for c in table.cells()
            if (c.transport, c.bs, c.iodepth) == (transport, PATH_BS, PATH_QD) and stack in (None, c.stack)
        ]  # fmt: skip
        if not cells and stack is None:
            raise SanlabError(
                f"stacks.yaml: paths.transports lists {transport!r}, but {table.source} has no "
                f"{PATH_BS // 1024} KiB QD {PATH_QD} cell of it (measure it: benchmarks/path_lengths.py)"
            )
        if not cells:
            return None

        def kinstr(groups: tuple[str, ...]) -> dict[str, float]:
            by_rw = {rw: [table.per_io(c, side, groups) for c in cells if c.rw == rw] for rw in RWS}
            return {rw: round(sum(v) / len(v) / 1000, 3) for rw, v in by_rw.items() if v}

        fam = family(transport)
        if side == "target":  # a target's block layer is its stack's: it runs no fio
            return SidePath(
                family=fam, cpi=self.paths.cpi[fam], stack_kinstr=kinstr(STACK_GROUPS + APP_GROUPS)
            )
        app, own = kinstr(APP_GROUPS), kinstr(STACK_GROUPS)
        return SidePath(family=fam, cpi=self.paths.cpi[fam], app_kinstr=app, stack_kinstr=own)

    def packet_kcycles(self) -> float | None:
        """The kernel's TCP/IP per frame a host handles: CPI × the path table's ``tcpip``
        instructions per frame (each side handles every frame of an I/O, sending or receiving),
        over the TCP transports' 4 KiB QD 1 cells and both sides; None without the table.
        The NIC's driver is each NIC's own (``Nic.host_kcycles_per_packet``): virtio stands in
        for it in the table."""
        if not self.paths:
            return None
        per_frame = tcpip_kinstr_per_frame(_table(), self.paths.transports)
        return None if per_frame is None else self.paths.cpi["tcpip"] * per_frame


def tcpip_kinstr_per_frame(table: PathTable, transports: list[str]) -> float | None:
    """Thousands of TCP/IP instructions per Ethernet frame per side (mean of the 4 KiB QD 1
    cells of ``transports`` that run over TCP, both sides); None when no such cell is measured."""
    cells = [
        c for c in table.cells()
        if c.transport in transports and not TRANSPORTS[c.transport].rdma
        and (c.bs, c.iodepth) == (PATH_BS, PATH_QD)
    ]  # fmt: skip
    figures = [
        table.group(c, side, "tcpip").instructions_per_io / table.frames_per_io(c) / 1000
        for c in cells
        for side in ("initiator", "target")
        if table.frames_per_io(c) > 0
    ]
    return sum(figures) / len(figures) if figures else None


@cache
def _table() -> PathTable:
    """models/data/paths/path-lengths.csv, read once."""
    return load_paths()


def path_cell(transport: str, rw: str, provider: str | None = None) -> PathCell:
    """The 4 KiB QD 1 cell a per-I/O cost is read from (one per transport and provider)."""
    return _table().find(transport, rw, PATH_BS, PATH_QD, provider)


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

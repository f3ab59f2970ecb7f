"""Hardware profiles: hosts, NICs, backends and fitted software costs, as YAML.

A profile is to the model what a bill of materials is to a machine: cores
and clock of each side, the NIC for each fabric and link rate, the backend
device, and the CPU cycles each storage stack spends per I/O and per byte.
CPU costs are kept in cycles, not microseconds, so that a cost fitted on a
3.5 GHz Xeon projects sensibly onto a 2.8 GHz one.  Published measurements
never appear here except through ``sanlab calibrate``, which fits the
``costs`` and ``nics`` parameters and records where they came from.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from sanlab.models.core.cores import REFERENCE_CORE, core_factor, load_cores
from sanlab.models.core.costs import (
    CYCLES_PER_BYTE_MAX,
    KCYCLES_MAX,
    US_MAX,
    Contention,
    Digests,
    Interrupts,
    StackCost,
    Strict,
    Tls,
)
from sanlab.models.core.pcie import MPS_DEFAULT, pcie_gbps
from sanlab.models.core.transports import ProtocolParams
from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.invalid import in_one_line
from sanlab.scenarios.registry import FABRICS, FabricName

# An interrupt's wake-up of a sleeping thread, per I/O and side (Host.wakeup_us says why).
WAKEUP_US = 2.0

GBYTES_MAX = 10_000.0
Gbps = Annotated[float, Field(gt=0, le=800)]


class Host(Strict):
    """One side's CPU: physical cores, sustained clock and core design."""

    cpu: str = ""
    cores: int = Field(ge=1, le=4096)
    ghz: float = Field(ge=0.1, le=10)
    # The stacks' costs are Skylake-equivalent cycles (models/cores.yaml).
    core: str = Field(REFERENCE_CORE, description="core design, e.g. haswell, skylake, golden-cove, zen4")
    app_kcycles_per_io: float = Field(3.0, ge=0, le=KCYCLES_MAX, description="fio + block layer, per I/O")
    # Yang, Minturn and Hady, "When Poll Is Better than Interrupt" (FAST 2012):
    # completing a 4 KiB I/O through an interrupt rather than by polling cost
    # a few microseconds (the interrupt, its handler, the scheduler waking the
    # sleeping thread, and the caches it disturbed): 2 us a side, the one default of every
    # host, shipped or written by hand (a profile states another only where it knows better).
    wakeup_us: float = Field(
        WAKEUP_US, ge=0, le=US_MAX, description="interrupt-to-thread latency, once per I/O"
    )
    # CRC32C, for iSCSI and NVMe/TCP digests: Linux's crc32c-intel runs
    # three CRC32 instruction streams at once (Gopal et al., Intel 2011;
    # Gueron, Information Processing Letters 112, 2012: 3-cycle latency and
    # 8 bytes per instruction make a serial stream 0.375 cycles/byte, and the
    # interleaved one almost 3x faster).  benchmarks/crc32c_speed.py measures
    # this host's.
    crc32c_cycles_per_byte: float = Field(
        0.14, ge=0.05, le=1.0, description="CRC32C cost per byte digested (sender computes, receiver checks)"
    )

    @model_validator(mode="after")
    def _known_core(self) -> Host:
        known = load_cores()
        if self.core not in known:
            raise ValueError(
                f"core {self.core!r} is not a known core design (use {', '.join(sorted(known))})"
            )
        return self

    @property
    def stack_ghz(self) -> float:
        """Thousands of the stacks' (Skylake-equivalent) cycles this CPU runs per microsecond."""
        return self.ghz * core_factor(self.core)


class PcieSlot(Strict):
    """A PCIe slot: generation (3, 4 or 5), lanes, and the Max_Payload_Size its root port runs
    (``lspci -vv``: DevCtl MaxPayload), which sets how much of each DMA write is header."""

    gen: Literal[3, 4, 5]
    lanes: Literal[1, 2, 4, 8, 16]
    mps: Literal[128, 256, 512] = MPS_DEFAULT


class Nic(Strict):
    """A network adapter and the link it drives."""

    name: str
    fabrics: list[FabricName]
    link_gbps: list[Gbps] = Field(min_length=1, max_length=16)
    toe: StrictBool = Field(False, description="TCP offload engine: no host CPU per frame")
    # TSO/GSO on send and GRO on receive, on by default in Linux on every NIC
    # here: the host's TCP path runs once per super-packet, not per frame.
    gso_gro: StrictBool = Field(True, description="segmentation and receive offload (TSO/GSO, GRO)")
    mtu: int = Field(1500, ge=576, le=65520)
    one_way_us: float = Field(2.0, ge=0, le=US_MAX, description="NIC + wire + switch latency, one way")
    host_kcycles_per_packet: float = Field(
        1.0,
        ge=0,
        le=KCYCLES_MAX,
        description="host CPU per packet its TCP stack handles (super-packet with gso_gro)",
    )
    pcie_gbps: float = Field(100.0, gt=0, le=10_000, description="effective DMA rate per direction")
    # Of one_way_us, the PCIe part at the two ends: the doorbell write, the
    # NIC's DMA read of the work request and data, the DMA write of data and
    # completion.  Neugebauer et al., "Understanding PCIe performance for end
    # host networking" (SIGCOMM 2018), measured a small DMA read across a
    # Xeon's root complex at several hundred nanoseconds (estimate: 0.5 us).
    pcie_us: float = Field(
        0.5, ge=0, le=US_MAX, description="PCIe doorbell and DMA latency within one_way_us"
    )
    # Interrupt moderation (ethtool -C rx-usecs) a completion may wait for
    # before its interrupt fires; 0 is adaptive moderation (mlx5's DIM,
    # ixgbe/i40e's adaptive-rx), which at one request in flight fires at once.
    irq_coalesce_us: float = Field(0.0, ge=0, le=1000, description="interrupt coalescing delay (rx-usecs)")
    # Under load, the window in which a connection's packets arriving one after another are
    # handled in one go: interrupt moderation (ethtool -C rx-usecs; mlx5 starts at 16 us or
    # 32 packets, and its DIM moves between them), GRO merging back-to-back segments of one
    # flow within a NAPI poll, and the transport's io_work sending what is queued in one call.
    batch_window_us: float = Field(8.0, ge=0, le=1000, description="packet batching window under load")
    # The slot, where a NIC names it: pcie_gbps then follows from the physics (models/core/pcie.py).
    pcie: PcieSlot | None = None
    # The NIC's own work per message it handles (a work request or descriptor it fetches, a
    # completion it writes, a doorbell it takes), beside the TLPs those cost the slot
    # (models/core/nicmsg.py); priors.yaml gives its source.
    msg_ns: float = Field(30.0, ge=0, le=10_000, description="NIC processing per message, ns")

    @model_validator(mode="before")
    @classmethod
    def _rate_from_slot(cls, data: Any) -> Any:
        slot = data.get("pcie") if isinstance(data, dict) else None
        if isinstance(slot, dict) and "pcie_gbps" not in data:
            try:
                rate = pcie_gbps(int(slot["gen"]), int(slot["lanes"]), int(slot.get("mps", MPS_DEFAULT)))
            except (KeyError, TypeError, ValueError):
                return data  # the slot's own fields say what is wrong with it
            data = dict(data, pcie_gbps=round(rate, 1))
        return data


class Switch(Strict):
    """A switch between the initiators and the target."""

    name: str = "cut-through Ethernet/IB switch"
    # NVIDIA Spectrum SN2000 and Quantum InfiniBand switches state about
    # 300 and 130 ns port to port (cut-through); store-and-forward adds a
    # frame's serialisation on top.
    latency_us: float = Field(0.3, ge=0, le=100, description="port-to-port latency")


class Backend(Strict):
    """The device behind the target: RAM disk, null device or NVMe SSD."""

    kind: Literal["null", "ramdisk", "nvme"]
    name: str = ""
    read_latency_us: float = Field(0.0, ge=0, le=US_MAX)
    write_latency_us: float = Field(0.0, ge=0, le=US_MAX)
    read_us_per_io: float = Field(0.0, ge=0, le=US_MAX)
    write_us_per_io: float = Field(0.0, ge=0, le=US_MAX)
    read_gbytes_per_s: float = Field(1000.0, gt=0, le=GBYTES_MAX)
    write_gbytes_per_s: float = Field(1000.0, gt=0, le=GBYTES_MAX)
    parallel: int = Field(1, ge=1, le=65536, description="independent internal channels")
    target_cycles_per_byte: float = Field(
        0.0, ge=0, le=CYCLES_PER_BYTE_MAX, description="target CPU per byte, e.g. memcpy out of a RAM disk"
    )


def _protocol_schema() -> Any:
    """The fields of models/core/transports.py's ProtocolParams, typed: a profile's ``protocol:``
    may set any of them, a size as a whole number of bytes, a switch as a boolean."""
    fields: dict[str, Any] = {}
    for item in dataclasses.fields(ProtocolParams):
        kind: Any = StrictBool if item.type in (bool, "bool") else Annotated[int, Field(ge=0, le=1 << 30)]
        fields[item.name] = (kind, None)
    return create_model("Protocol", __config__=ConfigDict(extra="forbid", allow_inf_nan=False), **fields)


_PROTOCOL = _protocol_schema()


class Calibration(BaseModel):
    """A profile's ``calibration:``: the published table it is fitted to (a file name in the
    tables' folder, never a path), the rows it picks, what it fits, whose CPU the table gives."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    # At most 80 characters between the first and ".csv", said by max_length: a bounded repeat of
    # Unicode's \w ({0,80}) cost the regex engine 33 ms to compile at every start (issue #46).
    data: Annotated[str, Field(max_length=85, pattern=r"^[A-Za-z0-9][\w.-]*\.csv$")] | None = None
    select: dict[str, Any] | None = None
    # the parameters to fit: names, or names with their bounds (a joint fit's own)
    fit: list[Annotated[str, Field(max_length=200)]] | dict[str, Any] = Field(default_factory=list)
    cpu: Literal["initiator", "target"] | None = None


class Profile(Strict):
    name: str
    description: str = ""
    initiator: Host
    target: Host
    nics: list[Nic] = Field(min_length=1)
    backends: dict[str, Backend]
    default_backend: Literal["null", "ramdisk", "nvme"] = "ramdisk"
    target_stacks: dict[str, str] = Field(
        default_factory=dict, description="transport -> default target stack"
    )
    target_polled: list[str] = Field(default_factory=list, description="stacks that poll")
    # The hosts are cabled back to back (as the calibrated benches were) unless
    # a switch is named; several initiators (incast) always meet in one, this
    # or a default cut-through switch.
    switch: Switch | None = None
    cable_m: float = Field(2.0, gt=0, le=100_000, description="cable length, for propagation delay")
    sessions: dict[str, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=dict, description="connections per transport"
    )
    protocol: dict[str, Any] = Field(default_factory=dict, description="ProtocolParams fields")
    max_transfer: dict[str, Annotated[int, Field(ge=512, le=1 << 30)]] = Field(
        default_factory=dict, description="transport -> largest request the block layer sends"
    )
    costs: dict[str, StackCost] = Field(
        default_factory=dict, description="'stack/transport': the stacks' costs, or the profile's own"
    )
    # CRC32C of digests by each stack's code, and TLS's AEAD: the stacks' (stacks.yaml), unless
    # the profile sets its own.
    digests: Digests
    tls: Tls
    interrupts: Interrupts
    contention: Contention
    calibration: dict[str, Any] = Field(default_factory=dict)

    @field_validator("protocol")
    @classmethod
    def _typed_protocol(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            _PROTOCOL.model_validate(value)
        except ValidationError as exc:
            raise ValueError(in_one_line(exc, _PROTOCOL)) from None
        return value

    @field_validator("calibration")
    @classmethod
    def _typed_calibration(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            Calibration.model_validate(value)
        except ValidationError as exc:
            raise ValueError(in_one_line(exc, Calibration, at=("calibration",))) from None
        return value

    def nic_for(self, fabric: str, link_gbps: float) -> Nic:
        """The profile's NIC that carries ``fabric`` at ``link_gbps``; never a guess from speed alone.

        Only a NIC whose fastest port reaches the link can carry it.  Among
        those, for plain Ethernet a NIC without TCP offload comes first
        (Linux's NVMe/TCP and open-iscsi run on the kernel's own TCP, not a
        TOE), then one that lists the speed exactly, then the profile's
        order.  A link faster than every NIC is an error that names them.
        """
        carrying = [n for n in self.nics if fabric in n.fabrics]
        if not carrying:
            have = "; ".join(f"{n.name}: {'/'.join(n.fabrics)}" for n in self.nics)
            raise ScenarioError(
                [Problem(f"profile {self.name}", "nics", f"no NIC for fabric {fabric!r} (has {have})")]
            )
        able = [n for n in carrying if max(n.link_gbps) >= link_gbps - 1e-6]
        if not able:
            have = ", ".join(f"{n.name} (up to {max(n.link_gbps):g} Gb/s)" for n in carrying)
            raise ScenarioError(
                [
                    Problem(
                        f"profile {self.name}",
                        "nics",
                        f"no NIC of this profile carries {fabric} at {link_gbps:g} Gb/s: {have}; "
                        f"use a lower link speed or a profile with a faster NIC{_faster(fabric, link_gbps)}",
                    )
                ]
            )

        def preference(nic: Nic) -> tuple[bool, bool, int]:
            offloaded = not FABRICS[fabric].rdma and nic.toe
            exact = any(abs(g - link_gbps) < 1e-6 for g in nic.link_gbps)
            return offloaded, not exact, self.nics.index(nic)

        return min(able, key=preference)


def _faster(fabric: str, link_gbps: float) -> str:
    """' (shipped: a, b)': the shipped profiles with a NIC that carries ``fabric`` at ``link_gbps``."""
    # Loading profiles is profile_files.py's job, and it imports this schema: asked only for an error.
    from sanlab.models.core.profile_files import load_profile, profile_names

    found = []
    for name in profile_names(shipped_only=True):
        try:
            nics = load_profile(name).nics
        except ScenarioError:
            continue
        if any(fabric in n.fabrics and max(n.link_gbps) >= link_gbps - 1e-6 for n in nics):
            found.append(name)
    return f" (shipped: {', '.join(found)})" if found else ""

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

import copy
import dataclasses
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path
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
from sanlab.models.core.params import set_param
from sanlab.models.core.pcie import MPS_DEFAULT, pcie_gbps
from sanlab.models.core.transports import ProtocolParams
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
from sanlab.scenarios.loader import problems_from, read_yaml
from sanlab.scenarios.reading import typed
from sanlab.scenarios.registry import FABRICS, MODEL_STACKS, FabricName
from sanlab.scenarios.schema import Scenario, Stack

# An interrupt's wake-up of a sleeping thread, per I/O and side (Host.wakeup_us says why).
WAKEUP_US = 2.0


class _Strict(BaseModel):
    # NaN and infinity are no measure of a machine; every figure below also has a physical range,
    # so that a profile of ``ghz: 1e308`` is one line, not 0 IOPS and a 130-digit latency.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# The widest a real part goes, with room to spare: bounds against nonsense, not against hardware.
KCYCLES_MAX = 10_000.0  # per I/O: ten million cycles
CYCLES_PER_BYTE_MAX = 100.0
US_MAX = 1e6  # a second
GBYTES_MAX = 10_000.0
Gbps = Annotated[float, Field(gt=0, le=800)]


class Host(_Strict):
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


class PcieSlot(_Strict):
    """A PCIe slot: generation (3, 4 or 5), lanes, and the Max_Payload_Size its root port runs
    (``lspci -vv``: DevCtl MaxPayload), which sets how much of each DMA write is header."""

    gen: Literal[3, 4, 5]
    lanes: Literal[1, 2, 4, 8, 16]
    mps: Literal[128, 256, 512] = MPS_DEFAULT


class Nic(_Strict):
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


class Switch(_Strict):
    """A switch between the initiators and the target."""

    name: str = "cut-through Ethernet/IB switch"
    # NVIDIA Spectrum SN2000 and Quantum InfiniBand switches state about
    # 300 and 130 ns port to port (cut-through); store-and-forward adds a
    # frame's serialisation on top.
    latency_us: float = Field(0.3, ge=0, le=100, description="port-to-port latency")


class Backend(_Strict):
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


class StackCost(_Strict):
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


class SideCost(_Strict):
    """What one side's software spends on an I/O: cycles per I/O and per data byte it receives."""

    kcycles_per_io: float = Field(0.0, ge=0, le=KCYCLES_MAX)
    cycles_per_byte: float = Field(0.0, ge=0, le=CYCLES_PER_BYTE_MAX)


class Digests(_Strict):
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


class Tls(_Strict):
    """What TLS 1.3's AEAD (AES-GCM) costs per byte a side encrypts or decrypts (NVMe/TCP's
    secure channel, kTLS); models/stacks.yaml gives the source."""

    cycles_per_byte: float = Field(ge=0.05, le=10, description="AEAD cost per byte sent or received")


class Interrupts(_Strict):
    """What one completion interrupt costs the core it lands on: the hard IRQ, the softirq that
    takes the completions, and waking the thread that sleeps on them (models/core/hostcpu.py)."""

    kcycles: float = Field(ge=0, le=200, description="per interrupt, Skylake-equivalent kcycles")


class Stacks(_Strict):
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
    data: Annotated[str, Field(pattern=r"^[A-Za-z0-9][\w.-]{0,80}\.csv$")] | None = None
    select: dict[str, Any] | None = None
    # the parameters to fit: names, or names with their bounds (a joint fit's own)
    fit: list[Annotated[str, Field(max_length=200)]] | dict[str, Any] = Field(default_factory=list)
    cpu: Literal["initiator", "target"] | None = None


class Profile(_Strict):
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
    calibration: dict[str, Any] = Field(default_factory=dict)

    @field_validator("protocol")
    @classmethod
    def _typed_protocol(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            _PROTOCOL.model_validate(value)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise ValueError(f"{where}: {error.get('input')!r}: {error['msg']}") from None
        return value

    @field_validator("calibration")
    @classmethod
    def _typed_calibration(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            Calibration.model_validate(value)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            raise ValueError(
                f"calibration.{where}: {str(error.get('input'))[:60]!r}: {error['msg']}"
            ) from None
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


PROFILE_DIR = Path(str(resources.files("sanlab.models.profiles")))
STACKS_FILE = Path(str(resources.files("sanlab.models"))) / "stacks.yaml"
# The stacks' document in a joint fit, and the prefix of its parameters' names.
STACKS = "stacks"


def _faster(fabric: str, link_gbps: float) -> str:
    """' (shipped: a, b)': the shipped profiles with a NIC that carries ``fabric`` at ``link_gbps``."""
    found = []
    for name in profile_names(shipped_only=True):
        try:
            nics = load_profile(name).nics
        except ScenarioError:
            continue
        if any(fabric in n.fabrics and max(n.link_gbps) >= link_gbps - 1e-6 for n in nics):
            found.append(name)
    return f" (shipped: {', '.join(found)})" if found else ""


def user_profile_dir() -> Path:
    """Profiles the user fitted to their own runs (sanlab calibrate --runs)."""
    explicit = os.environ.get("SANLAB_PROFILES")
    if explicit:
        return Path(explicit)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "sanlab" / "profiles"


def profile_names(shipped_only: bool = False) -> list[str]:
    """Shipped profiles, then the user's own (a user profile never shadows a shipped one)."""
    shipped = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml") if not p.name.endswith(".fit.yaml"))
    if shipped_only:
        return shipped
    user_dir = user_profile_dir()
    own = sorted(p.stem for p in user_dir.glob("*.yaml")) if user_dir.is_dir() else []
    return shipped + [n for n in own if n not in shipped]


def fit_path(profile: Path) -> Path:
    """Where ``sanlab calibrate --write`` keeps a profile's fitted values: beside it.

    Beside the file itself, not the link to it: an editable install reaches
    the clone's files through a tree of links, and a fit written there would
    miss the clone (where ``--help`` says it goes) and vanish on reinstall.
    """
    try:
        return profile.resolve().with_name(profile.stem + ".fit.yaml")
    except (OSError, RuntimeError):  # a symlink loop: reading the profile itself says so
        return profile.with_name(profile.stem + ".fit.yaml")


class _FitFile(BaseModel):
    """What a ``.fit.yaml`` beside a profile must hold (``sanlab calibrate --write`` writes it):
    typed, so that a fit that is a list, holds lists or has a number for a key is one line."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    parameters: dict[Annotated[str, Field(pattern=r"^\S{1,200}$")], float] = Field(default_factory=dict)


def apply_fit(data: Any, profile: Path) -> Any:
    """Overlay the fitted parameter values (if any) on a hand-written profile."""
    fitted = fit_path(profile)
    if isinstance(data, dict) and os.path.lexists(fitted):
        document = read_yaml(fitted)
        fit = typed(_FitFile, {} if document is None else document, str(fitted))
        for name, value in fit.parameters.items():
            try:
                set_param(data, name, value)
            except SanlabError as exc:
                raise SanlabError(f"{fitted}: parameters: {exc}") from None
    return data


def given_profile(ctx: Any, param: Any, value: str | None) -> str | None:
    """A click callback for ``--profile``/``--base``: an empty name is refused in one line,
    never read as "the default" (an unset shell variable gives one)."""
    import click  # only the command line calls this

    if value is not None and not value.strip():
        raise click.BadParameter(
            f"{value!r} is not a profile (use {', '.join(profile_names())}, or a .yaml path)"
        )
    return value


def profile_path(name: str) -> Path:
    shipped = PROFILE_DIR / f"{name}.yaml"
    if shipped.is_file():
        return shipped
    own = user_profile_dir() / f"{name}.yaml"
    return own if own.is_file() else shipped


_CACHE: dict[str, Profile] = {}
# Profiles being loaded, outermost first: a ``from:`` back to one of them is a circle.
_LOADING: list[str] = []


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (from models/profiles) or by path to a YAML file."""
    if name_or_path in _CACHE:
        return _CACHE[name_or_path]
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        if name_or_path not in profile_names():
            raise ScenarioError(
                [
                    Problem(
                        "profile",
                        "",
                        f"{name_or_path!r} is not a profile (use {', '.join(profile_names())})",
                    )
                ]
            )
        path = profile_path(name_or_path)
    key = os.path.realpath(path)  # never raises: a symlink loop is refused when it is read
    if key in _LOADING:
        chain = " -> ".join([*(Path(k).stem for k in _LOADING[_LOADING.index(key) :]), path.stem])
        raise ScenarioError([Problem(str(path), "from", f"profiles inherit in a circle ({chain}); break it")])
    _LOADING.append(key)
    try:
        own = apply_fit(read_yaml(path), path)
        data = with_stacks(inherit(copy.deepcopy(own), str(path)), load_stacks(), sets_own_app(own))
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from(exc, str(path), Profile)) from None
    finally:
        _LOADING.pop()
    _CACHE[name_or_path] = profile
    return profile


def lenders(data: dict[str, Any]) -> set[str]:
    """The profiles whose parts ``data`` borrows (``from:`` on its hosts, NICs and backends,
    the parts ``inherit`` resolves)."""
    nics, backends = data.get("nics"), data.get("backends")
    parts = [data.get("initiator"), data.get("target"), *(nics if isinstance(nics, list) else [])]
    parts += list(backends.values()) if isinstance(backends, dict) else []
    return {str(p["from"]) for p in parts if isinstance(p, dict) and "from" in p}


def inherit(data: Any, source: str, lookup: Callable[[str], Profile] | None = None) -> Any:
    """Resolve ``from: PROFILE`` in hosts, NICs and backends.

    ``{from: starwind-2024, cores: 32}`` under ``initiator`` means "the
    initiator of starwind-2024, with 32 cores": a fitted value lives in one
    file only and every profile that shares the part follows it.  A joint
    fit passes ``lookup``, so that a study borrowing from another study of
    the same fit takes that study's values in the fit, not its committed ones.
    """
    if not isinstance(data, dict):
        return data
    find = lookup or load_profile

    def resolve(entry: Any, where: str, pick: Any) -> Any:
        if not (isinstance(entry, dict) and "from" in entry):
            return entry
        other = find(str(entry["from"]))
        base = pick(other)
        if base is None:
            raise ScenarioError([Problem(source, where, f"{entry['from']!r} has no such part")])
        merged = base.model_dump() | {k: v for k, v in entry.items() if k not in ("from", "like")}
        return merged

    for side in ("initiator", "target"):
        if side in data:
            data[side] = resolve(data[side], side, lambda o, s=side: getattr(o, s))
    nics = data.get("nics")
    for i, nic in enumerate(nics if isinstance(nics, list) else []):
        # ``like`` borrows another NIC's fitted parts for a NIC of a new name
        name = nic.get("like", nic.get("name")) if isinstance(nic, dict) else None
        data["nics"][i] = resolve(
            nic, f"nics[{i}]", lambda o, n=name: next((x for x in o.nics if x.name == n), None)
        )
        if isinstance(nic, dict) and "from" in nic and "pcie" in nic and "pcie_gbps" not in nic:
            data["nics"][i].pop("pcie_gbps", None)  # a new slot: its rate follows from it, not the donor's
    backends = data.get("backends")
    for key, backend in (backends if isinstance(backends, dict) else {}).items():
        data["backends"][key] = resolve(backend, f"backends.{key}", lambda o, k=key: o.backends.get(k))
    return data


def clear_cache() -> None:
    _CACHE.clear()
    _STACKS.clear()


_STACKS: dict[str, Stacks] = {}


def load_stacks() -> Stacks:
    """The stacks' costs: models/stacks.yaml with its fitted values (stacks.fit.yaml) laid over."""
    if "" not in _STACKS:
        _STACKS[""] = parse_stacks(apply_fit(read_yaml(STACKS_FILE), STACKS_FILE), str(STACKS_FILE))
    return _STACKS[""]


def parse_stacks(data: Any, source: str) -> Stacks:
    try:
        return Stacks.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from(exc, source, Stacks)) from None


def sets_own_app(own: Any) -> bool:
    """Whether a profile's own file gives its initiator an application cost (a user's fitted profile does)."""
    side = own.get("initiator") if isinstance(own, dict) else None
    return isinstance(side, dict) and "app_kcycles_per_io" in side


def with_stacks(data: Any, stacks: Stacks, own_app: bool = False) -> Any:
    """A profile's data with the stacks' costs filled in.

    The initiator's application cost is the stacks' unless the profile sets
    its own; every target stack's cost, joined with its transport's
    initiator, goes under ``costs``, where a cost the profile gives itself
    (a profile fitted to the user's runs) wins.
    """
    if not isinstance(data, dict):
        return data
    if not own_app and isinstance(data.get("initiator"), dict):
        data["initiator"] = dict(data["initiator"], app_kcycles_per_io=stacks.application.kcycles_per_io)
    library = {key: stacks.cost(key).model_dump() for key in stacks.targets}
    data["costs"] = library | dict(data.get("costs") or {})
    data.setdefault("digests", stacks.digests.model_dump())
    data.setdefault("tls", stacks.tls.model_dump())
    data.setdefault("interrupts", stacks.interrupts.model_dump())
    return data


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


def check_projection_profiles(scenario: Scenario) -> list[tuple[str, str]]:
    """Problems with the profiles a scenario's projections use: unknown names, bad files, and
    core designs models/cores.yaml does not know.

    Each profile is loaded as ``sanlab model`` would load it, so that
    ``sanlab validate`` accepts exactly what ``sanlab model`` accepts.
    """
    problems = []
    known = load_cores()
    for i, p in enumerate(scenario.projections):
        try:
            load_profile(p.profile)
        except ScenarioError as exc:
            first = exc.problems[0]
            detail = first.message if first.source == "profile" else str(first)
            problems.append((f"projections[{i}].profile", detail))
        if p.core and p.core not in known:
            problems.append(
                (
                    f"projections[{i}].core",
                    f"{p.core!r} is not a core design (use {', '.join(sorted(known))})",
                )
            )
    return problems

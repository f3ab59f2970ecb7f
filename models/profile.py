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

from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.loader import problems_from, read_yaml
from sanlab.scenarios.schema import Scenario


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Host(_Strict):
    """One side's CPU: physical cores and sustained clock."""

    cpu: str = ""
    cores: int = Field(ge=1)
    ghz: float = Field(gt=0)
    app_kcycles_per_io: float = Field(3.0, ge=0, description="fio + block layer, per I/O")
    wakeup_us: float = Field(0.0, ge=0, description="interrupt-to-thread latency, once per I/O")


class Nic(_Strict):
    """A network adapter and the link it drives."""

    name: str
    fabrics: list[Literal["eth", "roce", "iwarp", "ib"]]
    link_gbps: list[float]
    toe: bool = Field(False, description="TCP offload engine: no host CPU per frame")
    mtu: int = 1500
    one_way_us: float = Field(2.0, ge=0, description="NIC + wire + switch latency, one way")
    host_kcycles_per_packet: float = Field(1.0, ge=0, description="host CPU per frame (software TCP)")
    pcie_gbps: float = Field(100.0, gt=0, description="effective DMA rate per direction")


class Backend(_Strict):
    """The device behind the target: RAM disk, null device or NVMe SSD."""

    kind: Literal["null", "ramdisk", "nvme"]
    name: str = ""
    read_latency_us: float = 0.0
    write_latency_us: float = 0.0
    read_us_per_io: float = 0.0
    write_us_per_io: float = 0.0
    read_gbytes_per_s: float = 1000.0
    write_gbytes_per_s: float = 1000.0
    parallel: int = Field(1, ge=1, description="independent internal channels")


class StackCost(_Strict):
    """CPU cycles one storage stack spends on an I/O, on each side.

    ``target_*`` is spent on the connection's (or queue's) serving thread,
    ``initiator_*`` on top of the application's own per-I/O work.
    """

    target_kcycles_per_io: float = Field(ge=0)
    target_cycles_per_byte: float = Field(0.0, ge=0)
    initiator_kcycles_per_io: float = Field(ge=0)
    initiator_cycles_per_byte: float = Field(0.0, ge=0)
    calibrated_on: str = ""


class Profile(_Strict):
    name: str
    description: str = ""
    initiator: Host
    target: Host
    nics: list[Nic] = Field(min_length=1)
    backends: dict[str, Backend]
    default_backend: str = "ramdisk"
    target_stacks: dict[str, str] = Field(
        default_factory=dict, description="transport -> default target stack"
    )
    target_polled: list[str] = Field(default_factory=list, description="stacks that poll")
    sessions: dict[str, int] = Field(default_factory=dict, description="connections per transport")
    protocol: dict[str, Any] = Field(default_factory=dict)
    costs: dict[str, StackCost] = Field(default_factory=dict, description="'stack/transport'")
    costs_from: list[str] = Field(default_factory=list, description="profiles to borrow costs from")
    calibration: dict[str, Any] = Field(default_factory=dict)

    def nic_for(self, fabric: str, link_gbps: float) -> Nic:
        for nic in self.nics:
            if fabric in nic.fabrics and any(abs(g - link_gbps) < 1e-6 for g in nic.link_gbps):
                return nic
        for nic in self.nics:
            if fabric in nic.fabrics:
                return nic
        have = "; ".join(f"{n.name}: {'/'.join(n.fabrics)} at {n.link_gbps} Gb/s" for n in self.nics)
        raise ScenarioError(
            [Problem(f"profile {self.name}", "nics", f"no NIC for fabric {fabric!r} (has {have})")]
        )


PROFILE_DIR = Path(str(resources.files("sanlab.models.profiles")))
DEFAULT_PROFILE = "modern-100g"
# Stacks without calibration data of their own borrow the costs of the most
# similar calibrated stack; models/README.md says why each pairing is fair.
STACK_STAND_INS = {"lio": "scst", "tgt": "scst", "nvmet": "spdk", "scst": "lio", "spdk": "nvmet"}


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def profile_path(name: str) -> Path:
    return PROFILE_DIR / f"{name}.yaml"


_CACHE: dict[str, Profile] = {}


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (from models/profiles) or by path to a YAML file."""
    if name_or_path in _CACHE:
        return _CACHE[name_or_path]
    path = Path(name_or_path)
    if not path.suffix:
        if name_or_path not in profile_names():
            raise ScenarioError(
                [Problem("profile", "", f"{name_or_path!r} is not a profile (use {', '.join(profile_names())})")]
            )
        path = profile_path(name_or_path)
    data = read_yaml(path)
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(problems_from(exc, str(path), Profile)) from None
    _CACHE[name_or_path] = profile
    return profile


def clear_cache() -> None:
    _CACHE.clear()


def stack_cost(profile: Profile, stack: str, transport: str) -> StackCost:
    """The costs of ``stack/transport``: own, borrowed, or a stand-in stack's."""
    chain = [profile] + [load_profile(n) for n in profile.costs_from]
    for candidate in (stack, STACK_STAND_INS.get(stack, stack)):
        for prof in chain:
            cost = prof.costs.get(f"{candidate}/{transport}")
            if cost is not None:
                return cost
    known = sorted({k for p in chain for k in p.costs})
    raise ScenarioError(
        [Problem(f"profile {profile.name}", "costs", f"no costs for {stack}/{transport} (has {', '.join(known)})")]
    )


def check_projection_profiles(scenario: Scenario) -> list[tuple[str, str]]:
    """Problems with the profile names a scenario's projections use."""
    names = profile_names()
    return [
        (f"projections[{i}].profile", f"{p.profile!r} is not a profile (use {', '.join(names)})")
        for i, p in enumerate(scenario.projections)
        if p.profile not in names and not Path(p.profile).is_file()
    ]

"""Profiles as files: where they are, reading them, ``from:`` inheritance, fitted values laid
over, and the stacks' costs (models/stacks.yaml) filled in.

The schema they are read into is models/core/profile.py (hardware) and models/core/costs.py
(the software's costs).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sanlab.models.core.cores import load_cores
from sanlab.models.core.costs import Stacks
from sanlab.models.core.params import set_param
from sanlab.models.core.paths import SIDES
from sanlab.models.core.profile import Profile
from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError
from sanlab.scenarios.invalid import problems_from
from sanlab.scenarios.loader import read_yaml
from sanlab.scenarios.reading import typed
from sanlab.scenarios.schema import Scenario

PROFILE_DIR = Path(str(resources.files("sanlab.models.profiles")))
STACKS_FILE = Path(str(resources.files("sanlab.models"))) / "stacks.yaml"
# The stacks' document in a joint fit, and the prefix of its parameters' names.
STACKS = "stacks"


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
    parameters: dict[Annotated[str, Field(max_length=200, pattern=r"^\S+$")], float] = Field(
        default_factory=dict
    )


# Parsed fit files, by path and the file's identity and age: read once a process while unchanged.
_FITS: dict[tuple[str, int, int, int], Any] = {}


def read_fit(path: Path) -> Any:
    """A ``.fit.yaml`` as parsed, read once a process while the file stays the same: the joint
    fit's is read by the stacks' overlay, the regimes, the reach and the posterior (6 ms each, a
    quarter of a point's YAML).  Callers only read what it returns."""
    try:
        info = os.stat(path)
    except OSError:
        return read_yaml(path)  # which says what is wrong, as for any file
    key = (str(path), info.st_ino, info.st_size, info.st_mtime_ns)
    if key not in _FITS:
        _FITS[key] = read_yaml(path)
    return _FITS[key]


def apply_fit(data: Any, profile: Path) -> Any:
    """Overlay the fitted parameter values (if any) on a hand-written profile."""
    fitted = fit_path(profile)
    if isinstance(data, dict) and os.path.lexists(fitted):
        document = read_fit(fitted)
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
    _FITS.clear()


_STACKS: dict[str, Stacks] = {}


def load_stacks() -> Stacks:
    """The stacks' costs: models/stacks.yaml with its fitted values (stacks.fit.yaml) laid over."""
    if "" not in _STACKS:
        data = apply_fit(read_yaml(STACKS_FILE), STACKS_FILE)
        _STACKS[""] = parse_stacks(with_fitted_busy_cores(data), str(STACKS_FILE))
    return _STACKS[""]


def with_fitted_busy_cores(data: Any) -> Any:
    """The stacks with the busy cores the joint fit's rows reached on each side (stacks.fit.yaml's
    ``busy_cores``, written by ``sanlab calibrate --write``): where contention starts to cost more
    than the fitted costs already carry (``costs.Contention``)."""
    fitted = fit_path(STACKS_FILE)
    document = read_fit(fitted) if os.path.lexists(fitted) else None
    busy = document.get("busy_cores") if isinstance(document, dict) else None
    if isinstance(data, dict) and isinstance(data.get("contention"), dict) and isinstance(busy, dict):
        reached = {f"{side}_from": busy[side] for side in SIDES if side in busy}
        data["contention"] = dict(data["contention"], **reached)
    return data


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
    initiator, goes under ``costs`` (and each stack sanlab runs, priced by the
    path table: ``Stacks.cost_keys``), where a cost the profile gives itself
    (a profile fitted to the user's runs) wins.
    """
    if not isinstance(data, dict):
        return data
    if not own_app and isinstance(data.get("initiator"), dict):
        data["initiator"] = dict(data["initiator"], app_kcycles_per_io=stacks.application.kcycles_per_io)
    library = {key: stacks.cost(key).model_dump() for key in stacks.cost_keys()}
    data["costs"] = library | dict(data.get("costs") or {})
    data.setdefault("digests", stacks.digests.model_dump())
    data.setdefault("tls", stacks.tls.model_dump())
    data.setdefault("interrupts", stacks.interrupts.model_dump())
    data.setdefault("contention", stacks.contention.model_dump())
    return data


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

"""``sanlab run SCENARIO --kernel A --kernel B``: one scenario, as it runs on each of two kernels.

A kernel is what a scenario's ``guest`` takes: a guest sanlab ships (``debian-12``,
``debian-13``), or a kernel the user brings, a ``linux-image`` .deb or a built tree,
booted with the scenario's own guest's user space.  Each run keeps its scenario as it ran
(its ``guest`` replaced, a brought kernel's path made absolute), so that ``--resume`` and
``sanlab compare`` read the same file the run was made from.  Whether a brought kernel is
one (a .deb, a tree, with every option the scenario needs) is the emulator's check, made by
the command line for both kernels before either boots.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.loader import parse_scenario, read_yaml
from sanlab.scenarios.registry import GUESTS
from sanlab.scenarios.schema import Scenario

KERNELS = 2  # a comparison sets two runs side by side
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


@dataclass(frozen=True)
class KernelRun:
    """One side of the comparison: the kernel as given, its run folder's name, the scenario."""

    given: str
    folder: str  # 'a-debian-12', 'b-linux-image-6.13.deb': a name, never a path
    scenario: Scenario
    text: str  # the scenario file this run keeps (scenario.yaml in its folder)


class _Plain(yaml.SafeDumper):
    """A dump with no anchors: the copy is read back by the checked loader (yamlfile.py)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def guest_for(given: str, base: str) -> str | dict[str, str]:
    """What ``guest:`` becomes for a kernel given as ``given``: a guest's name as it is, else a
    brought kernel (an absolute path) on ``base``'s user space; one line if it is neither."""
    if given in GUESTS:
        return given
    if not given.strip() or any(c in given for c in "\x00\n\r"):
        raise SanlabError(
            f"--kernel {given!r}: is no kernel (give a linux-image .deb, a built tree, or a guest)"
        )
    path = os.path.abspath(os.path.expanduser(given))
    if not os.path.lexists(path):
        raise SanlabError(
            f"--kernel {given}: no such file or directory, and not a guest (give a linux-image .deb, "
            f"a built kernel tree, or one of {', '.join(GUESTS)})"
        )
    return {"kernel": path, "base": base}


def kernel_runs(path: Path, given: Sequence[str]) -> list[KernelRun]:
    """The scenario at ``path`` once per kernel, checked as a scenario (not yet booted)."""
    if len(given) != KERNELS:
        raise SanlabError(
            f"--kernel: give it {KERNELS} times, once per kernel to compare (given {len(given)})"
        )
    data = read_yaml(path)
    base = parse_scenario(data, str(path)).guest_name  # every problem of the file itself, first
    runs = []
    for side, kernel in zip("ab", given, strict=True):
        copy = dict(data, guest=guest_for(kernel, base))
        scenario = parse_scenario(copy, f"{path} (--kernel {kernel})")
        if scenario.name is None:
            scenario = scenario.model_copy(update={"name": path.stem})
        name = _UNSAFE.sub("-", Path(kernel).name).strip(".-")[:48] or "kernel"
        text = yaml.dump(copy, Dumper=_Plain, sort_keys=False, allow_unicode=True)
        runs.append(KernelRun(kernel, f"{side}-{name}", scenario, text))
    return runs

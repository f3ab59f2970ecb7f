"""The scenario file: what a lab is made of and what to measure or project.

A scenario is data, like a Mininet topology: hosts with roles, links between
them, the storage targets that run on the hosts, a fio matrix, and the
hardware profiles onto which the models project the same matrix.  Every model
forbids unknown fields, so a typo is an error instead of a silent default.

``scenarios/schema.json`` is exported from these classes (``python -m
sanlab.scenarios.schema``) and a test keeps it in sync.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any

from pydantic import Field, model_validator

# The field types and sections live in fields.py and parts.py; the ones readers of a scenario
# use are this module's too (__all__), so they import the scenario file's words from here.
from sanlab.scenarios.fields import (
    DEFAULT_PROFILE,
    MAX_HOSTS,
    MAX_IODEPTH,
    MAX_NUMJOBS,
    MAX_SWITCHES,
    PATTERN_HINTS,
    READ_WRITE,
    BlockSize,
    Fabric,
    Label,
    RdmaDriver,
    ReadWrite,
    Stack,
    Strict,
    Transport,
)
from sanlab.scenarios.parts import (
    Chap,
    Fault,
    Flow,
    Host,
    KnownBug,
    Link,
    Projection,
    Switch,
    Target,
    Workload,
)
from sanlab.scenarios.plan import Plan, resolve
from sanlab.scenarios.registry import DEFAULT_GUEST, GuestName

__all__ = [
    "DEFAULT_PROFILE",
    "MAX_IODEPTH",
    "MAX_NUMJOBS",
    "PATTERN_HINTS",
    "READ_WRITE",
    "BlockSize",
    "Chap",
    "Fabric",
    "Fault",
    "Host",
    "KernelGuest",
    "KnownBug",
    "Label",
    "Link",
    "Projection",
    "RdmaDriver",
    "ReadWrite",
    "Scenario",
    "Stack",
    "Strict",
    "Switch",
    "Target",
    "Transport",
    "Workload",
    "schema_text",
]


class KernelGuest(Strict):
    """A guest that boots a kernel sanlab did not ship, in place of its Debian kernel: a kernel
    package (``linux-image-*.deb``) or a built tree (``bzImage``, ``.config`` and the modules
    of ``make modules_install INSTALL_MOD_PATH=<tree>``).  The user space is ``base``'s.
    A relative path is read from the current directory; sanlab only reads it."""

    kernel: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"^[^\x00\n\r]+$")]
    base: GuestName = DEFAULT_GUEST


# The sections no plan reads (plan.py's resolve): a copy that changes only these keeps its plan.
PLAN_FREE = frozenset({"name", "description", "known_bug"})


class Scenario(Strict):
    """A whole lab: hosts, links, targets, workloads, capture and projections."""

    name: Label | None = None
    description: Annotated[str, Field(max_length=2000)] = ""
    # The guest image every VM boots (scenarios/registry.py's GUESTS), or one of them with a
    # kernel the user brings.
    guest: GuestName | KernelGuest = DEFAULT_GUEST
    hosts: Annotated[list[Host], Field(max_length=MAX_HOSTS)] = []
    switches: Annotated[list[Switch], Field(max_length=MAX_SWITCHES)] = []
    links: Annotated[list[Link], Field(max_length=64)] = []
    targets: Annotated[list[Target], Field(max_length=64)] = []
    workloads: Annotated[list[Workload], Field(max_length=32)] = []
    capture: bool = False
    faults: Annotated[list[Fault], Field(max_length=16)] = []
    background: Annotated[list[Flow], Field(max_length=8)] = []
    projections: Annotated[list[Projection], Field(max_length=256)] = []
    # A reproducer's kernel bug: on a kernel that has it, the points that show it end known-bad.
    known_bug: KnownBug | None = None

    @property
    def guest_name(self) -> GuestName:
        """The guest whose user space the VMs boot (and whose kernel, unless one is brought)."""
        return self.guest.base if isinstance(self.guest, KernelGuest) else self.guest

    @property
    def kernel(self) -> str | None:
        """The kernel file or tree the user brings, as written; None: the guest's own."""
        return self.guest.kernel if isinstance(self.guest, KernelGuest) else None

    @cached_property
    def plan(self) -> Plan:
        """This scenario resolved once: names, link kinds, target placements (scenarios/plan.py)."""
        return resolve(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Scenario:
        """A copy whose plan is worked out afresh when ``update`` may change what it follows
        from; a copy that only names the scenario (the loader's) keeps the plan already worked
        out, so a scenario is resolved once, not once by validation and again by its run."""
        copy = super().model_copy(update=update, deep=deep)
        if deep or not set(update or {}) <= PLAN_FREE:
            copy.__dict__.pop("plan", None)
        return copy

    @model_validator(mode="after")
    def _declares_something(self) -> Scenario:
        if not (self.hosts or self.projections):
            raise ValueError("declares neither hosts nor projections: nothing to run or project")
        return self


def schema_text() -> str:
    """The JSON schema of a scenario file, as committed in schema.json."""
    return json.dumps(Scenario.model_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    sys.stdout.write(schema_text())

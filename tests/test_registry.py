"""One registry of transports, fabrics and stacks (scenarios/registry.py), read by every layer.

A new transport variant should be one entry there, its recipes, its costs
and its tests: so no other module may branch on a transport's, fabric's or
stack's name, and every list of them (the schema's enums, the command
line's choices, the model's builders, the emulator's modules) is the
registry's own.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import click
import pytest

from sanlab.scenarios import registry, schema
from sanlab.scenarios.registry import FABRICS, STACKS, TRANSPORTS

ROOT = Path(__file__).resolve().parent.parent
# The recipes that implement a transport may name it: the targets' stack recipes, the model's
# message ladders, the analyser's decoders, which name what they saw on the wire (and the
# registry itself).
RECIPES = {
    "scenarios/registry.py",
    "targets/stacks.py",
    "models/transports.py",
    "dissectors/attribute.py",
    "dissectors/framing.py",
    "dissectors/frames.py",
    "dissectors/analyze.py",
}
ALL_NAMES = "|".join(re.escape(n) for n in (*TRANSPORTS, *FABRICS, *STACKS))
# `x == "iser"`, `x != "eth"`, `x in ("iscsi", ...)`, `.startswith("nvme")`, `{"iscsi": ...}`.
BRANCH = re.compile(
    rf"""(==|!=|\bin)\s*\(?\s*["']({ALL_NAMES})["']|["']({ALL_NAMES})["']\s+(not\s+)?in\b"""
    rf"""|startswith\(["']nvme|^\s*["']({ALL_NAMES})["']\s*:"""
)


def _branches(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if BRANCH.search(line)]


def test_no_module_branches_on_a_name_outside_the_registry_and_the_recipes():
    found = {}
    for layer in ("cli", "scenarios", "emulator", "targets", "models", "dissectors"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel not in RECIPES and (lines := _branches(path.read_text())):
                found[rel] = lines
    assert found == {}


def test_the_branch_finder_can_fail():
    assert _branches('    trtype = "tcp" if transport == "nvme-tcp" else "rdma"')
    assert _branches('    if link.fabric in ("roce", "ib") and x:')
    assert _branches('    "iscsi": ("iscsiadm",),')
    assert _branches('    fabric = "iwarp" if "iwarp" in seen else "eth"')
    assert _branches('    return "nvmet" if transport.startswith("nvme") else "lio"')
    assert not _branches("    if TRANSPORTS[target.transport].rdma:")


def test_the_schemas_names_are_the_registrys():
    assert typing.get_args(schema.Transport) == tuple(TRANSPORTS)
    assert typing.get_args(schema.Fabric) == tuple(FABRICS)
    assert typing.get_args(schema.Stack) == tuple(STACKS)
    drivers = {f.soft_driver for f in FABRICS.values() if f.soft_driver}
    assert set(typing.get_args(schema.RdmaDriver)) == drivers == set(registry.SOFT_RDMA_MODULES)


def test_the_command_lines_choices_are_the_registrys():
    from sanlab.commands_model import model

    choices = {p.name: p.type.choices for p in model.params if isinstance(p.type, click.Choice)}
    assert tuple(choices["transport"]) == tuple(TRANSPORTS)
    assert tuple(choices["fabric"]) == tuple(FABRICS)
    assert tuple(choices["target_stack"]) == tuple(STACKS)


def test_the_model_builds_every_transport_and_the_emulator_checks_its_modules():
    from sanlab.emulator.machines import MODULES
    from sanlab.models.transports import _BUILDERS

    assert set(_BUILDERS) == set(TRANSPORTS)
    assert set(MODULES) == {m for t in TRANSPORTS.values() for m in t.modules}


def test_the_sweeps_options_are_the_schemas_projection_fields():
    from sanlab.models.sweep import PROJECTION_KEYS

    assert set(PROJECTION_KEYS) == set(schema.Projection.model_fields) - {"label", "initiators"}


@pytest.mark.parametrize("transport", TRANSPORTS.values(), ids=list(TRANSPORTS))
def test_each_transport_is_whole(transport):
    """Its fabrics and stacks exist, its default stack serves it, its restartable stacks are emulated."""
    assert transport.fabrics and set(transport.fabrics) <= set(FABRICS)
    assert transport.stacks and set(transport.stacks) <= set(STACKS)
    assert transport.rdma == all(FABRICS[f].rdma for f in transport.fabrics)
    assert transport.default_stack in transport.stacks and STACKS[transport.default_stack].emulated
    assert all(STACKS[s].emulated for s in transport.restartable)
    assert transport.name in registry.serving(transport.default_stack)


def test_each_emulated_rdma_fabric_has_a_soft_driver_with_a_module():
    for fabric in FABRICS.values():
        assert (fabric.soft_driver is not None) == fabric.rdma
        if fabric.soft_driver:
            assert fabric.soft_driver in registry.SOFT_RDMA_MODULES


def test_every_projection_field_is_a_model_option_and_reaches_the_models_point():
    """The projection options have one home, the schema: ``sanlab model`` offers each, and a
    projection hands each to the model's Point (none copied by hand on the way)."""
    from dataclasses import fields

    from sanlab.commands_model import model
    from sanlab.models.cores import load_cores
    from sanlab.models.network import Point
    from sanlab.models.project import CARRIED, WORKED_OUT, jobs
    from sanlab.scenarios.loader import parse_scenario
    from sanlab.scenarios.schema import Projection

    options = {p.name for p in model.params}
    assert set(Projection.model_fields) - {"label"} <= options
    shared = {f.name for f in fields(Point)} & set(Projection.model_fields)
    assert shared == set(Projection.model_fields) - {"label"}  # the label names a row, not a point
    assert set(CARRIED) | set(WORKED_OUT) == shared
    chosen = {
        "profile": "modern-100g",
        "mtu": 9000,
        "target_stack": "spdk",
        "backend": "null",
        "sessions": 3,
        "cores": 24,
        "core": next(iter(load_cores())),
        "header_digest": True,
        "data_digest": True,
        "tls": True,
        "poll": True,
        "queues": 5,
    }
    assert set(chosen) == set(CARRIED)
    projection = {"transport": "nvme-tcp", "fabric": "eth", "link_gbps": 100, **chosen}
    data = {"workloads": [{"rw": "randread", "bs": 4096, "iodepth": 1}], "projections": [projection]}
    (job,) = jobs(parse_scenario(data, "x.yaml"))
    assert {name: getattr(job.point, name) for name in CARRIED} == chosen

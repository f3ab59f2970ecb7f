"""One registry of transports, fabrics and stacks (scenarios/registry.py), read by every layer.

A new transport variant should be one entry there, its recipes, its costs
and its tests: so no other module may branch on a transport's, fabric's or
stack's name, and every list of them (the schema's enums, the command
line's choices, the model's builders, the emulator's modules) is the
registry's own.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import click
import pytest

from sanlab.scenarios import registry, schema
from sanlab.scenarios.registry import FABRICS, STACKS, TRANSPORTS

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("cli", "scenarios", "emulator", "targets", "models", "dissectors")
# The recipes that implement a transport may name it: the targets' stack recipes, the model's
# message ladders, the analyser's decoders, which name what they saw on the wire.
RECIPES = {
    "targets/stacks.py",
    "models/core/transports.py",
    "dissectors/attribute.py",
    "dissectors/frames.py",
}
# Every name a branch could test: the transports, fabrics and stacks, and the model's local kind.
NAMES = frozenset((*TRANSPORTS, *FABRICS, *STACKS, registry.LOCAL.name, registry.LOCAL_STACK.name))


def _constants(source: str) -> dict[str, str]:
    """A module's own constants that spell a registry name (``LOCAL = "local"``): a branch on
    one is a branch on the name, as models/core/network.py's LOCAL was."""
    found = {}
    for node in ast.parse(source).body:
        value = node.value if isinstance(node, ast.Assign) else None
        if isinstance(value, ast.Constant) and value.value in NAMES:
            found |= {t.id: str(value.value) for t in node.targets if isinstance(t, ast.Name)}
    return found


def _named(node: ast.AST, constants: dict[str, str]) -> set[str]:
    """The registry names a literal holds (a string, or a tuple, list or set of them), or a
    constant spelling one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, ast.Name) and node.id in constants:
        return {constants[node.id]}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {name for element in node.elts for name in _named(element, constants)}
    return set()


def _prefixed(call: ast.Call) -> set[str]:
    """The names ``x.startswith("nvme")`` (or endswith) would pick out by their spelling."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr in ("startswith", "endswith")):
        return set()
    arg = call.args[0] if call.args else None
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and len(arg.value) >= 2):
        return set()
    if call.func.attr == "startswith":
        return {n for n in NAMES if n.startswith(arg.value)}
    return {n for n in NAMES if n.endswith(arg.value)}


def _branches(source: str, constants: dict[str, str] | None = None) -> list[tuple[int, list[str]]]:
    """(line, names) of each branch on a registry name: a comparison or ``in`` test with one
    (if, elif, a conditional expression, a filter), a ``case`` of a match, a dict keyed by one,
    or a test of its spelling (startswith).  ``constants``: names that spell one (default: the
    module's own)."""
    known = _constants(source) if constants is None else constants
    found = []
    for node in ast.walk(ast.parse(source)):
        names: set[str] = set()
        if isinstance(node, ast.Compare):
            names = {n for operand in (node.left, *node.comparators) for n in _named(operand, known)}
        elif isinstance(node, ast.MatchValue):
            names = _named(node.value, known)
        elif isinstance(node, ast.Dict):
            names = {n for key in node.keys if key is not None for n in _named(key, known)}
        elif isinstance(node, ast.Call):
            names = _prefixed(node)
        if names:
            found.append((node.lineno, sorted(names)))
    return sorted(found)


def _found(root: Path) -> dict[str, list[str]]:
    """Each module under ``root``'s layers that branches on a name: its lines, as written.  A
    constant spelling a name counts in every module (it travels by import)."""
    paths = [path for layer in LAYERS for path in sorted((root / layer).rglob("*.py"))]
    constants = {k: v for path in paths for k, v in _constants(path.read_text()).items()}
    found = {}
    for path in paths:
        text = path.read_text()
        if hits := _branches(text, constants):
            lines = text.splitlines()
            found[str(path.relative_to(root))] = [f"{n}: {lines[n - 1].strip()}" for n, _ in hits]
    return found


def test_no_module_branches_on_a_name_outside_the_registry_and_the_recipes():
    outside = {rel: lines for rel, lines in _found(ROOT).items() if rel not in RECIPES}
    assert outside == {}


def test_every_exempt_recipe_still_needs_its_exemption():
    """An exemption for a file that no longer names anything is a hole waiting to be used."""
    assert set(_found(ROOT)) >= RECIPES


@pytest.mark.parametrize(
    "line",
    [
        'trtype = "tcp" if transport == "nvme-tcp" else "rdma"',
        "if link.fabric in ('roce', 'ib') and x:\n    pass",
        'tools = {"iscsi": ("iscsiadm",)}',
        'fabric = "iwarp" if "iwarp" in seen else "eth"',
        'stack = "nvmet" if transport.startswith("nvme") else "lio"',
        "match target.stack:\n    case 'tgt':\n        pass",
        "if point.transport != 'local':\n    pass",
        'LOCAL = "local"\nstack = LOCAL if point.transport == LOCAL else point.target_stack',
        'if "spdk" == stack or stack != "scst":\n    pass',
        "rows = [r for r in rows if r.transport not in {'srp', 'iser'}]",
    ],
)
def test_the_branch_finder_finds_a_branch(line):
    assert _branches(line)


@pytest.mark.parametrize(
    "line",
    [
        "if TRANSPORTS[target.transport].rdma:\n    pass",
        'kind = MODEL_TRANSPORTS["local"]',  # a look-up in the registry: not a branch
        'print("iscsi")',
        'if name == "localhost":\n    pass',
        'if rule.startswith("tcp."):\n    pass',
    ],
)
def test_the_branch_finder_leaves_what_is_no_branch(line):
    assert _branches(line) == []


def test_a_planted_branch_is_reported(tmp_path):
    """The whole scan, not only the parser: a module planted in a layer is found by name."""
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "models" / "planted.py").write_text(
        "def f(point):\n    if point.transport == 'local':\n        return 0\n    return 1\n"
    )
    (tmp_path / "emulator" / "fine.py").write_text("def g(t):\n    return TRANSPORTS[t].rdma\n")
    # A constant spelling a name, imported and branched on elsewhere (models/core/network.py's LOCAL).
    (tmp_path / "models" / "kinds.py").write_text('LOCAL = "local"\n')
    (tmp_path / "models" / "user.py").write_text(
        "from sanlab.models.kinds import LOCAL\n\nlocal = [r for r in rows if r.transport != LOCAL]\n"
    )
    assert _found(tmp_path) == {
        "models/planted.py": ["2: if point.transport == 'local':"],
        "models/user.py": ["3: local = [r for r in rows if r.transport != LOCAL]"],
    }


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
    from sanlab.models.core.transports import _BUILDERS

    assert set(_BUILDERS) == set(TRANSPORTS)
    assert set(MODULES) == {m for t in TRANSPORTS.values() for m in t.modules}


def test_the_sweeps_options_are_the_schemas_projection_fields():
    from sanlab.models.sweeps.sweep import PROJECTION_KEYS

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
    from sanlab.models.core.cores import load_cores
    from sanlab.models.core.network import Point
    from sanlab.models.core.project import CARRIED, WORKED_OUT, jobs
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


def _scenario(guest: str, tls: object = None) -> dict:
    target = {"name": "t", "host": "target", "stack": "nvmet", "transport": "nvme-tcp"}
    return {
        "guest": guest,
        "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
        "links": [{"name": "eth", "endpoints": ["initiator", "target"], "fabric": "eth"}],
        "targets": [target | ({} if tls is None else {"tls": tls})],
        "workloads": [{"rw": "randwrite", "bs": 4096}],
        "projections": [{"transport": "nvme-tcp", "fabric": "eth", "link_gbps": 100}],
    }


def test_a_transport_always_inside_tls_is_one_registry_fact(monkeypatch):
    """A variant such as NVMe/TCP-in-TLS as a transport of its own needs no reader of its own:
    the registry says ``always_tls`` and the schema turns ``tls`` on, so validation (the guest
    whose kernel has TLS), the recipes (tlshd, the PSK, --tls) and the model (the AEAD's cost)
    all follow from the flag they read already.  Here NVMe/TCP stands in for such a variant."""
    from dataclasses import replace

    from sanlab.models.core.project import jobs
    from sanlab.scenarios.errors import ScenarioError
    from sanlab.scenarios.loader import parse_scenario

    assert not parse_scenario(_scenario("debian-13"), "x.yaml").targets[0].tls  # as shipped: a choice
    monkeypatch.setitem(TRANSPORTS, "nvme-tcp", replace(TRANSPORTS["nvme-tcp"], always_tls=True))
    scenario = parse_scenario(_scenario("debian-13"), "x.yaml")
    assert scenario.targets[0].tls is True and scenario.projections[0].tls is True
    assert all(job.point.tls for job in jobs(scenario))  # the model costs the AEAD
    with pytest.raises(ScenarioError, match="needs guest debian-13"):
        parse_scenario(_scenario("debian-12"), "x.yaml")  # the guest check follows the flag
    with pytest.raises(ScenarioError, match="always inside TLS"):
        parse_scenario(_scenario("debian-13", tls=False), "x.yaml")

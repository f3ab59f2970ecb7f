"""Data flows one way; imports must too.  Each layer may import only the layers below it.

Why each layer may import what it does:
- scenarios: the shared vocabulary (the schema, the registry of transports,
  fabrics and stacks, what a Host and a progress line are, sizes, records).
  It imports nothing else of sanlab, so every layer can stand on it.
- emulator: makes hosts (VMs, SSH machines) and links from a scenario; it
  needs only the vocabulary.
- targets: configures storage stacks on any Host and runs fio.  Its recipes
  take hosts through the vocabulary's Host protocol, never the emulator's
  classes.  What runs a whole scenario or a lab's targets (run_session.py,
  on_machines.py, lab_targets.py) stands on the emulator, which makes the
  hosts it runs on: data flows emulator -> targets, never back.
- dissectors: reads captures; it needs the vocabulary's ports, headers and
  transport names, nothing that made the capture.
- models: projects the vocabulary's scenarios and points onto hardware
  profiles; it knows nothing of how a run was made.
- vm-images: data only.
Only the command line (cli/) wires them together: it parses, calls and prints,
and nothing imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAY_IMPORT = {
    "scenarios": {"scenarios"},
    "emulator": {"emulator", "scenarios"},
    "targets": {"targets", "emulator", "scenarios"},
    "dissectors": {"dissectors", "scenarios"},
    "models": {"models", "scenarios"},
    "vm-images": set(),
}
PACKAGES = {"scenarios", "emulator", "targets", "dissectors", "models", "vm_images"}


def _imported_layers(path: Path) -> set[str]:
    layers = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "sanlab" and len(parts) > 1:
                layers.add(parts[1] if parts[1] in PACKAGES else "cli")
    return layers


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_a_layer_imports_only_what_lies_below_it(layer):
    wrong = {
        str(path.relative_to(ROOT)): sorted(_imported_layers(path) - MAY_IMPORT[layer])
        for path in (ROOT / layer).rglob("*.py")
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def test_the_check_can_fail():
    """The parser sees a forbidden import when there is one."""
    sample = ROOT / "targets" / "runner.py"
    assert "scenarios" in _imported_layers(sample)
    assert _imported_layers(ROOT / "targets" / "on_machines.py") >= {"emulator", "targets", "scenarios"}


# The targets modules that run a scenario or a lab on hosts the emulator made; the
# recipes (stacks, initiators, fio, faults, the runner) must not know how hosts are made.
ORCHESTRATION = {"run_session.py", "on_machines.py", "lab_targets.py", "lab_keeper.py"}


def test_only_orchestration_in_targets_reaches_the_emulator():
    reaching = {p.name for p in (ROOT / "targets").glob("*.py") if "emulator" in _imported_layers(p)}
    assert reaching <= ORCHESTRATION

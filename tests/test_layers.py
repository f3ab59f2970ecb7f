"""Data flows one way; imports must too.  Each layer may import only the layers below it.

Why each layer may import what it does:
- scenarios: the shared vocabulary (the schema, the registry of transports,
  fabrics and stacks, what a Host and a progress line are, sizes, records).
  It imports nothing else of sanlab, so every layer can stand on it.
- emulator: makes hosts (VMs, SSH machines) and links from a scenario; it
  needs only the vocabulary.
- targets: configures storage stacks on any Host and runs fio.  Its recipes
  take hosts through the vocabulary's Host protocol, never the emulator's
  classes.  What runs a whole scenario or a lab's targets (the sessions in
  targets/sessions/: a run's, a lab's keepers, the link doctor) stands on the
  emulator, which makes the hosts it runs on, and on the recipes: data flows
  emulator -> targets, never back, and recipes -> sessions, never back.
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
import os
import shutil
import subprocess
import sys
import tomllib
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
    sample = ROOT / "targets" / "point_run.py"
    assert "scenarios" in _imported_layers(sample)
    sessions = ROOT / "targets" / "sessions" / "on_machines.py"
    assert _imported_layers(sessions) >= {"emulator", "targets", "scenarios"}


def _recipes() -> list[Path]:
    """targets/'s own modules, outside its sessions/ folder: the recipes."""
    return [p for p in (ROOT / "targets").rglob("*.py") if "sessions" not in p.relative_to(ROOT).parts]


def test_only_the_sessions_folder_in_targets_reaches_the_emulator():
    """The recipes (stacks, initiators, fio, faults, points) must not know how hosts are made;
    what runs a scenario or a lab on hosts the emulator made lives in targets/sessions/."""
    assert _recipes() and (ROOT / "targets" / "sessions").is_dir()
    assert sorted(str(p.relative_to(ROOT)) for p in _recipes() if "emulator" in _imported_layers(p)) == []


def test_no_recipe_imports_a_session():
    sessions = "sanlab.targets.sessions"
    importing = []
    for path in _recipes():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            if isinstance(node, ast.ImportFrom) and node.module == "sanlab.targets":
                names = [f"sanlab.targets.{alias.name}" for alias in node.names]
            if any(n == sessions or n.startswith(sessions + ".") for n in names):
                importing.append(str(path.relative_to(ROOT)))
    assert importing == []


# --- the same rules as import-linter contracts (pyproject.toml), checked by the tool -------

CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_contracts_name_every_command_line_module():
    """The command line is the root package's own modules: the contract lists them all, so a
    new verb module cannot be imported from below unnoticed."""
    cli_on_top = next(c for c in CONTRACTS if c["id"] == "cli-on-top")
    modules = {f"sanlab.{p.stem}" for p in (ROOT / "cli").glob("*.py") if not p.stem.startswith("__")}
    assert set(cli_on_top["forbidden_modules"]) == modules


def _package_copy(folder: Path) -> Path:
    """The package laid out as it installs (pyproject's package-dir), with the contracts."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, source in setuptools["package-dir"].items():
        target = folder.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for path in (ROOT / source).glob("*.py"):
            shutil.copyfile(path, target / path.name)
    (folder / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    return folder


def _lint_imports(folder: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"PYTHONPATH": str(folder)}
    tool = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(tool), "--no-cache"], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.subprocess  # runs lint-imports
def test_import_linter_keeps_every_contract(tmp_path):
    result = _lint_imports(_package_copy(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:]
    assert f"{len(CONTRACTS)} kept, 0 broken" in result.stdout


@pytest.mark.subprocess  # runs lint-imports
@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("scenarios/planted.py", "from sanlab.targets import point_run", "each layer imports only"),
        ("emulator/planted.py", "import sanlab.targets.fio", "each layer imports only"),
        ("models/planted.py", "from sanlab.emulator import qemu", "know nothing of how a run was made"),
        ("dissectors/planted.py", "from sanlab.models import network", "each layer imports only"),
        ("targets/planted.py", "from sanlab import main", "nothing below the command line"),
        ("targets/planted.py", "from sanlab.emulator import lab", "the recipes know neither"),
        ("targets/planted.py", "from sanlab.targets.sessions import lab_targets", "the recipes know neither"),
        ("scenarios/planted.py", "from sanlab.scenarios.results import records", "neither the results nor"),
        ("scenarios/planted.py", "import sanlab.scenarios.labs.checking", "neither the results nor"),
    ],
)
def test_a_planted_forbidden_import_breaks_its_contract(tmp_path, module, planted, contract):
    """The contracts can fail, for the right reason: each planted import is reported by name."""
    copy = _package_copy(tmp_path)
    layer, name = module.split("/")
    (copy / "sanlab" / layer / name).write_text(f'"""Planted by a test."""\n\n{planted}\n')
    result = _lint_imports(copy)
    assert result.returncode != 0, result.stdout[-3000:]
    broken = result.stdout[result.stdout.index("Broken contracts") :]
    assert contract in broken and f"sanlab.{layer}.planted" in broken, broken[-3000:]

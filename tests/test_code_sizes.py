"""No function over 60 lines and no module over 500 in product code (issue #49).

Why: a function a reader cannot see whole on one screen, or a module that holds more than one
job, is where a newcomer stops knowing what they may touch.  The bounds are the developers'
guide's; this test is what keeps them, for every folder that installs as sanlab (not tests/,
not benchmarks/).  A function's length runs from its ``def`` line to its last line (its
decorators, such as a command's click options, are declarations and not counted).

``OVER_TODAY`` names, one by one, what was over when the test was written and is being split by
someone else (models/ is being regrouped, issue #49).  It may only shrink: an entry that is no
longer over fails the test until it is struck off, and nothing new may be added to it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("cli", "scenarios", "emulator", "targets", "dissectors", "models", "vm-images")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500

# "path" is a module over MAX_MODULE_LINES; "path:Qualified.name" a function over MAX_FUNCTION_LINES.
OVER_TODAY: frozenset[str] = frozenset()  # none left; an entry may only ever be taken off


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of a module, nested ones included, with its qualified name."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def oversized(root: Path, folders: tuple[str, ...] = PRODUCT) -> dict[str, int]:
    """Each module over MAX_MODULE_LINES and function over MAX_FUNCTION_LINES under ``root``'s
    ``folders``, as in OVER_TODAY, with its length in lines."""
    over = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            where = path.relative_to(root).as_posix()
            if len(text.splitlines()) > MAX_MODULE_LINES:
                over[where] = len(text.splitlines())
            for name, node in _functions(ast.parse(text, filename=str(path))):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    over[f"{where}:{name}"] = length
    return over


def test_no_module_or_function_in_product_code_is_over_its_bound():
    over = oversized(ROOT)
    new = {name: lines for name, lines in over.items() if name not in OVER_TODAY}
    assert not new, "over the bound (split by job; docstrings say why):\n" + "\n".join(
        f"  {name}: {lines} lines" for name, lines in sorted(new.items())
    )


def test_the_list_of_what_is_over_today_only_shrinks():
    gone = sorted(OVER_TODAY - set(oversized(ROOT)))
    assert not gone, f"no longer over (or moved): strike these off OVER_TODAY: {gone}"


def test_the_check_fails_on_a_planted_long_function_and_module(tmp_path):
    def block(indent: int) -> str:
        return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))

    cli = tmp_path / "cli"
    cli.mkdir()
    (cli / "fits.py").write_text("def fits():\n" + block(4))  # exactly 60 lines
    (cli / "long.py").write_text("class Vm:\n    def command(self):\n" + block(8) + "        y = 1\n")
    (cli / "inner.py").write_text("def outer():\n    def inner():\n" + block(8) + "        y = 1\n")
    (cli / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(MAX_MODULE_LINES + 1)))
    assert oversized(tmp_path, ("cli",)) == {
        "cli/long.py:Vm.command": MAX_FUNCTION_LINES + 1,
        "cli/inner.py:outer": MAX_FUNCTION_LINES + 2,
        "cli/inner.py:outer.inner": MAX_FUNCTION_LINES + 1,
        "cli/big.py": MAX_MODULE_LINES + 1,
    }

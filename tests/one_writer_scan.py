"""Every call in product code that writes a file, found from the syntax tree (tests/test_one_writer.py).

sanlab writes files only through scenarios/writing.py (and the output
folder's manifest on top of it, scenarios/results/outdir.py).  This finds every call
that could write a file some other way: ``open`` in a writing mode, a
``Path``'s ``open``/``write_text``/``write_bytes``/``replace``/``rename``,
``os.open`` with writing flags, ``os.replace``/``os.rename``, ``shutil``'s
copies and moves, Matplotlib's ``savefig`` to a path, named temporaries
(``mkstemp``, ``NamedTemporaryFile``), ``json.dump`` and ``write_table`` to a
path or handle.  What is left after the allowlist is a bypass.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("cli", "emulator", "targets", "scenarios", "dissectors", "models", "vm-images")

# Files that may write as they like, and why.  Keep this tiny.
ALLOWED_FILES = {
    "scenarios/writing.py": "the one writer itself",
    "vm-images/agent.py": "runs inside the guest VM, writing the guest's files the host asks for",
    "emulator/mininet_fabric.py": "runs inside the fabric VM under Debian's python3, without sanlab",
    "targets/blktests_guest.py": "runs inside the initiator VM as blktests' target control, without sanlab",
}
# (file, function, call) allowed to write past the writer; a folder built whole goes into place
# through writing.rename_into_place, so none is needed today.
ALLOWED_CALLS: dict[tuple[str, str, str], str] = {}
# Receivers whose write_text/write_bytes are OutputFolder's (the manifest's writer), not Path's.
FOLDER_NAMES = {"folder", "self.folder", "self"}
# os.open flags that only read: anything else (O_WRONLY, O_CREAT, a variable...) counts as a write.
READ_FLAGS = {"os", "O_RDONLY", "O_DIRECTORY", "O_CLOEXEC", "O_NONBLOCK", "O_NOFOLLOW", "O_NOCTTY", "O_PATH"}
NAMED_TEMPORARIES = {"mkstemp", "NamedTemporaryFile", "mktemp", "SpooledTemporaryFile"}
OTHER_WRITERS = {"symlink_to", "hardlink_to", "truncate", "extractall", "savetxt", "to_csv", "to_parquet"}
OS_WRITERS = {"os.symlink", "os.link", "os.truncate", "os.ftruncate", "os.mkfifo", "os.mknod"}


@dataclass(frozen=True)
class Write:
    path: str
    line: int
    function: str
    call: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} in {self.function}(): {self.call}"


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode string of an open call, '' when absent, None when not a constant."""
    node = call.args[position] if len(call.args) > position else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            node = keyword.value
    if node is None:
        return ""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _writes_mode(mode: str | None) -> bool:
    return mode is None or any(c in mode for c in "wax+")


def _flag_names(node: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name)
    }


def writes_of(call: ast.Call) -> str | None:
    """What ``call`` writes with (its name), or None if it writes no file."""
    func = call.func
    name = _dotted(func)
    attr = func.attr if isinstance(func, ast.Attribute) else name
    receiver = _dotted(func.value) if isinstance(func, ast.Attribute) else ""
    if name == "open":
        return "open" if _writes_mode(_mode(call, 1)) else None
    if name == "os.open":
        if call.args and _dotted(call.args[0]) == "os.devnull":
            return None
        flags = call.args[1] if len(call.args) > 1 else None
        return "os.open" if flags is None or _flag_names(flags) - READ_FLAGS else None
    if attr == "open" and receiver not in ("tarfile", "os", "io", "gzip", "bz2", "lzma", "OutputFolder"):
        return f"{receiver}.open" if _writes_mode(_mode(call, 0)) else None
    if attr in ("write_text", "write_bytes") and receiver not in FOLDER_NAMES:
        return attr
    if name in ("os.replace", "os.rename", "os.renames", "shutil.move") or name.startswith("shutil.copy"):
        return name
    if name in OS_WRITERS:
        return name
    if attr == "rename" or (attr == "replace" and len(call.args) == 1 and not call.keywords):
        return attr  # Path.rename / Path.replace (str.replace takes two arguments)
    if attr == "savefig" or attr in NAMED_TEMPORARIES or attr in OTHER_WRITERS:
        return attr
    if name in ("json.dump", "yaml.dump", "yaml.safe_dump", "pickle.dump", "np.save", "numpy.save"):
        return name if len(call.args) > 1 or any(k.arg == "stream" for k in call.keywords) else None
    if attr == "write_table":
        target = call.args[1] if len(call.args) > 1 else None
        return None if isinstance(target, ast.Name) and target.id == "sink" else "write_table"
    return None


def scan_source(source: str, path: str) -> list[Write]:
    """Every write call in ``source`` (a file at ``path`` relative to the repository)."""
    found: list[Write] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                call = writes_of(child)
                if call is not None:
                    found.append(Write(path, child.lineno, function, call))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def bypasses(writes: list[Write]) -> list[Write]:
    """The writes the allowlist does not excuse."""
    return [
        w
        for w in writes
        if w.path not in ALLOWED_FILES
        and (w.path, w.function, w.call.rsplit(".", 1)[-1]) not in ALLOWED_CALLS
    ]


def product_writes() -> list[Write]:
    found: list[Write] = []
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            found += scan_source(path.read_text(), relative)
    return found

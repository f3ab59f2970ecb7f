"""Paths inside QEMU's option strings are escaped (emulator/qemu_opts.py), and nothing bypasses it.

A run folder named ``lab,logfile=…`` once went into ``-chardev socket,path=…`` as it was,
so the user's folder name could add a QEMU option.  These tests check the escape against
QEMU itself and against the reader that proves a QEMU is ours, and scan every option
string sanlab builds for a value pasted without it."""

from __future__ import annotations

import ast
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sanlab.emulator.processes import option_values
from sanlab.emulator.qemu_opts import opt_value
from sanlab.scenarios.errors import SanlabError

REPO = Path(__file__).resolve().parent.parent
# The option keys whose value is a path QEMU opens or creates.
PATH_KEYS = ("path=", "file=", "logfile=", "unix:")
HOSTILE = ["/r/a,b/s.sock", "/r/x,logfile=/tmp/evil/s.sock", "/r/,,/s", "/r/plain/s", "/r/a,,server=off/s"]


@pytest.mark.parametrize("path", HOSTILE)
def test_a_value_comes_back_whole_from_the_option_reader(path):
    word = f"socket,id=con,path={opt_value(path)},server=on,wait=off"
    assert path in option_values(word)
    assert option_values(word).count("on") == 1  # server=on stayed one option; nothing was added


@pytest.mark.parametrize("bad", ["/r/a\nb", "/r/a\0b"])
def test_a_newline_or_nul_is_refused(bad):
    with pytest.raises(SanlabError, match="QEMU option"):
        opt_value(bad)


def _pasted_paths(source: str) -> list[str]:
    """The f-string pieces of ``source`` that put a value after a path key without opt_value."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        previous = ""
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                previous = part.value
            elif isinstance(part, ast.FormattedValue):
                call = part.value
                wrapped = isinstance(call, ast.Call) and getattr(call.func, "id", "") == "opt_value"
                if previous.endswith(PATH_KEYS) and not wrapped:
                    found.append(f"line {node.lineno}: {previous}{{{ast.unparse(part.value)}}}")
                previous = ""
    return found


def test_the_scan_finds_a_pasted_path():
    assert _pasted_paths('x = f"socket,id=a,path={where},server=on"\n')
    assert not _pasted_paths('x = f"socket,id=a,path={opt_value(where)},server=on"\n')


def test_no_qemu_option_string_in_the_product_pastes_a_path():
    """Every f-string in emulator/ that puts a value after ``path=``, ``file=``, ``logfile=`` or
    ``unix:`` passes it through opt_value.  The KVM probe's ``-serial file:…`` is exempt: QEMU
    takes that legacy form's path verbatim, without splitting at commas, and it is a temporary
    folder of sanlab's own."""
    offenders = []
    for module in sorted((REPO / "emulator").glob("*.py")):
        for hit in _pasted_paths(module.read_text()):
            if module.name == "accel.py" and "file:{log}" in hit:
                continue
            offenders.append(f"emulator/{module.name} {hit}")
    assert not offenders, "values pasted into QEMU options without opt_value:\n" + "\n".join(offenders)


@pytest.mark.subprocess
def test_qemu_reads_the_escaped_path_as_one_path(tmp_path):
    """QEMU itself: a socket asked for in a folder named ``a,logfile=…`` is made there, and no
    log file of the folder name's choosing appears."""
    qemu = shutil.which("qemu-system-x86_64")
    assert qemu, "qemu-system-x86_64 is needed (the README's system packages)"
    folder = tmp_path / "a,logfile=evil.log,b"
    folder.mkdir()
    sock, qmp = folder / "con.sock", folder / "qmp.sock"
    argv = [qemu, "-M", "none", "-nodefaults", "-display", "none", "-S"]
    argv += ["-chardev", f"socket,id=con,path={opt_value(sock)},server=on,wait=off"]
    argv += ["-qmp", f"unix:{opt_value(qmp)},server=on,wait=off"]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        made = lambda: sock.is_socket() and qmp.is_socket()  # noqa: E731
        while not made() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        said = b"" if proc.poll() is None else proc.stdout.read()  # type: ignore[union-attr]
        assert sock.is_socket() and qmp.is_socket(), said
        assert not (tmp_path / "evil.log").exists()
    finally:
        proc.terminate()
        proc.wait(10)

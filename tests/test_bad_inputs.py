"""Hostile input gets a one-line error naming the file or field and what is allowed.

Every case of ``bad_inputs.py`` (broken scenarios, bad ``sanlab model``
invocations) and the captures built below: exit code 1 or 2, no traceback,
an error line that names the file or option, and an answer before a hang
guard of 60 s.  The guard is enforced with SIGALRM, so a hang fails the case
instead of the whole run; it is generous on purpose: it catches a hang, not
a slow machine (a 5 s bound once failed a correct case on a busy 2-core host).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from bad_inputs import MODEL_CASES, Case, scenario_cases, valid_controls
from click.testing import CliRunner

from sanlab.main import cli
from support import REPO, require_tool

GOLDEN = REPO / "tests" / "golden"
LIMIT_S = 60.0


@contextmanager
def deadline(seconds: float = LIMIT_S) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def invoke(*args: str):
    with deadline():
        return CliRunner().invoke(cli, list(args))


def error_lines(output: str) -> list[str]:
    """The output less click's usage banner: what the user is told is wrong."""
    return [line for line in output.splitlines() if line.strip() and not line.startswith(("Usage:", "Try '"))]


def assert_clean_failure(result, expect: str, names: str) -> None:
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"raised {result.exception!r}"
    )
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    lines = error_lines(result.output)
    assert lines and all(names in line for line in lines), result.output
    assert any(expect in line for line in lines), result.output
    assert all(len(line) < 400 for line in lines)


SCENARIOS = scenario_cases()


def test_the_corpus_is_large():
    assert len(SCENARIOS) + len(MODEL_CASES) + len(CAPTURES) >= 150


@pytest.mark.parametrize("case", SCENARIOS, ids=[c.name for c in SCENARIOS])
def test_bad_scenario(tmp_path, case: Case):
    path = tmp_path / "bad.yaml"
    path.write_bytes(case.content)
    assert_clean_failure(invoke("validate", str(path)), case.expect, str(path))


@pytest.mark.parametrize("case", valid_controls(), ids=[c.name for c in valid_controls()])
def test_a_near_miss_still_validates(tmp_path, case: Case):
    path = tmp_path / "ok.yaml"
    path.write_bytes(case.content)
    result = invoke("validate", str(path))
    assert result.exit_code == 0, result.output


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert_clean_failure(invoke("validate", str(fifo)), "not a regular file", str(fifo))


def test_a_directory_is_refused(tmp_path):
    assert_clean_failure(invoke("validate", str(tmp_path)), "a directory", str(tmp_path))


def test_run_refuses_a_bad_file_before_booting(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(SCENARIOS[0].content)
    assert_clean_failure(invoke("run", str(path), "--out", str(tmp_path / "out")), "host memory", str(path))
    assert not (tmp_path / "out").exists()


@pytest.mark.subprocess  # starts sanlab, a tool or a helper as a process
def test_the_whole_corpus_in_one_real_process(tmp_path):
    """The installed command, not the test runner: one line per problem, each naming its file."""
    paths = []
    for i, case in enumerate(SCENARIOS):
        path = tmp_path / f"case{i:03d}.yaml"
        path.write_bytes(case.content)
        paths.append(path)
    sanlab = Path(sys.executable).with_name("sanlab")
    run = subprocess.run(
        [str(sanlab), "validate", *map(str, paths)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr
    named = {line.split(":", 1)[0] for line in run.stderr.splitlines()}
    assert named == {str(p) for p in paths}


@pytest.mark.parametrize("args,expect", MODEL_CASES, ids=[" ".join(a)[:60] for a, _ in MODEL_CASES])
def test_bad_model_invocation(args: list[str], expect: str):
    result = invoke("model", *args)
    assert_clean_failure(result, expect, "")


# --- captures -----------------------------------------------------------------


def _editcap(*args: str) -> None:
    subprocess.run([require_tool("editcap"), *args], check=True, capture_output=True, timeout=60)


def _make(kind: str, tmp: Path) -> Path:
    """Build one bad capture in ``tmp``; returns its path."""
    path = tmp / f"{kind}.pcap"
    golden = GOLDEN / "nvme-tcp.pcap"
    if kind == "missing":
        return path
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("this is not a capture\n")
    elif kind == "random":
        path.write_bytes(bytes((i * 7919) % 256 for i in range(4096)))
    elif kind == "header-only":
        path.write_bytes(golden.read_bytes()[:24])
    elif kind == "torn":
        data = golden.read_bytes()
        path.write_bytes(data[: len(data) // 2 + 3])
    elif kind.startswith("snaplen-"):
        _editcap("-s", kind.split("-")[1], str(GOLDEN / f"{kind.split('-', 2)[2]}.pcap"), str(path))
    elif kind == "user0":
        _editcap("-T", "user0", str(golden), str(path))
    elif kind == "arp-only":
        _editcap("-r", str(golden), str(path), "1-3")  # the capture opens with ARP
    elif kind == "ports-unknown":
        path.write_bytes(_udp_pcap())
    return path


def _udp_pcap() -> bytes:
    """Three UDP frames to port 9 (discard): IP traffic that is no storage protocol."""
    header = bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000")
    frame = bytes.fromhex(
        "525400000001525400000002080045000020000100004011f97aa9fe0a01a9fe0a02d431000900040000" + "00" * 4
    )
    record = (1).to_bytes(4, "little") + (0).to_bytes(4, "little") + len(frame).to_bytes(4, "little") * 2
    return header + (record + frame) * 3


CAPTURES: list[tuple[str, str]] = [
    ("missing", "No such file"),
    ("directory", "not a regular file"),
    ("fifo", "not a regular file"),
    ("empty", "empty file"),
    ("text", "tshark could not read it"),
    ("random", "tshark could not read it"),
    ("header-only", "holds no frames"),
    ("torn", "tshark could not read it"),
    ("snaplen-80-nvme-tcp", "cut short when captured"),
    ("snaplen-80-nvme-rdma-rxe", "cut short when captured"),
    ("snaplen-200-srp-rxe", "cut short when captured"),
    ("snaplen-64-iscsi-tcp", "cut short when captured"),
    ("user0", "is IPv4"),
    ("arp-only", "is IPv4"),
    ("ports-unknown", "--decode-as"),
]


@pytest.mark.tshark
@pytest.mark.parametrize("kind,expect", CAPTURES, ids=[k for k, _ in CAPTURES])
def test_bad_capture(tmp_path, kind: str, expect: str):
    require_tool("tshark")
    path = _make(kind, tmp_path)
    result = invoke("analyze", str(path))
    assert_clean_failure(result, expect, str(path))
    assert "Running as user" not in result.output


@pytest.mark.tshark
def test_a_bad_decode_as_rule_is_named(tmp_path):
    require_tool("tshark")
    result = invoke("analyze", str(GOLDEN / "iscsi-tcp.pcap"), "--decode-as", "tcp.port==1;rm -rf /,iscsi")
    assert_clean_failure(result, "--decode-as", "--decode-as")


@pytest.mark.tshark
def test_two_interleaved_captures_do_not_crash(tmp_path):
    merged = tmp_path / "two.pcap"
    subprocess.run(
        [
            require_tool("mergecap"),
            "-w",
            str(merged),
            str(GOLDEN / "nvme-tcp.pcap"),
            str(GOLDEN / "iscsi-tcp.pcap"),
        ],
        check=True,
        timeout=60,
    )
    result = invoke("analyze", str(merged))
    assert result.exit_code == 0 and "Traceback" not in result.output


@pytest.mark.tshark
def test_tgt_port_3261_is_iscsi(tmp_path):
    """sanlab's own tgt serves iSCSI on 3261: a capture of it is iSCSI, not 'unknown'."""
    moved = tmp_path / "tgt.pcap"
    _rewrite_port(GOLDEN / "iscsi-tcp.pcap", moved, 3260, 3261)
    result = invoke("analyze", str(moved))
    assert result.exit_code == 0 and "iscsi over eth" in result.output, result.output


def _rewrite_port(source: Path, dest: Path, old: int, new: int) -> None:
    """Move TCP port ``old`` to ``new`` in a classic pcap of Ethernet/IPv4 frames (checksums are
    not checked by tshark by default)."""
    data = bytearray(source.read_bytes())
    offset = 24
    while offset + 16 <= len(data):
        incl = int.from_bytes(data[offset + 8 : offset + 12], "little")
        frame = offset + 16
        if data[frame + 12 : frame + 14] == b"\x08\x00" and data[frame + 23] == 6:
            tcp = frame + 14 + (data[frame + 14] & 0x0F) * 4
            for at in (tcp, tcp + 2):
                if int.from_bytes(data[at : at + 2], "big") == old:
                    data[at : at + 2] = new.to_bytes(2, "big")
        offset = frame + incl
    dest.write_bytes(bytes(data))

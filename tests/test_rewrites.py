"""Retransmissions that carry other bytes than the segment they repeat (ghost writes in the making).

``tests/data/ghost-write-siw.pcap`` is 142 frames of a real capture: path A
of ``multipath-scsi.yaml``'s tgt iSER target over siw, 2026-11-26: the
connection's start and login (so iSER over iWARP is decoded), then its last
frames, as the cable was pulled in the middle of an RDMA Read Response.  When the cable
came back 21 s later the initiator's old socket retransmitted the first
1,448 bytes at the same sequence numbers, but by then dm-multipath had
completed the write over path B and fio had filled the buffer with another
block (its verify header names another offset).
"""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest
from click.testing import CliRunner
from pcapgen import TcpStream, write_pcap

from sanlab import commands_run
from sanlab.dissectors.rewrites import rewritten_retransmissions
from sanlab.main import cli
from sanlab.scenarios.results.records import ResultRecord
from support import REPO

GHOST = REPO / "tests" / "data" / "ghost-write-siw.pcap"
GOLDEN = sorted((REPO / "tests" / "golden").glob("*.pcap"))


def test_the_captured_retransmission_of_a_reused_buffer_is_found():
    [found] = rewritten_retransmissions(GHOST)
    assert (found.first_frame, found.again_frame) == (136, 138)
    assert (found.src, found.sport, found.dst, found.dport) == ("169.254.10.1", 47187, "169.254.10.2", 3260)
    assert (found.length, found.differing) == (1448, 1404)  # the DDP/RDMAP header is all that matches


def test_the_pull_benchmark_counts_what_the_old_connection_sent_after_the_cable():
    """benchmarks/rdma_path_pulls.py's measure of a dead path's socket: the initiator's
    retransmitted 1,448 bytes, 21 s after the connection fell silent."""
    spec = importlib.util.spec_from_file_location(
        "rdma_path_pulls", REPO / "benchmarks" / "rdma_path_pulls.py"
    )
    assert spec is not None and spec.loader is not None
    pulls = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pulls)
    assert pulls.sent_after_silence(GHOST) == {("169.254.10.1", 47187): 1448}
    golden = REPO / "tests" / "golden" / "iser-siw-qd4.pcap"
    assert pulls.sent_after_silence(golden) == {}  # no connection of a quiet run falls silent


@pytest.mark.parametrize("capture", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_no_golden_capture_has_one(capture):
    assert rewritten_retransmissions(capture) == []


def test_a_faithful_retransmission_is_no_rewrite_and_a_changed_one_is(tmp_path):
    stream = TcpStream(40000, 3260)
    first = stream.send(b"A" * 100)
    same = stream.segment(1000, b"A" * 100)
    changed = stream.segment(1000, b"A" * 60 + b"B" * 40)
    [found] = rewritten_retransmissions(write_pcap(tmp_path / "t.pcap", [first, same, changed]))
    assert (found.first_frame, found.again_frame, found.differing, found.length) == (1, 3, 40, 100)


def test_a_retransmission_of_acknowledged_bytes_compares_nothing(tmp_path):
    """The receiver has the bytes and drops a copy, whatever it holds; and the analyser forgets
    acknowledged bytes, so its memory is bounded by what is in flight."""
    stream = TcpStream(40000, 3260)
    first = stream.send(b"A" * 100)
    answer = stream.send(b"r", from_client=False)  # acknowledges the client's 100 bytes
    late = stream.segment(1000, b"B" * 100)
    assert rewritten_retransmissions(write_pcap(tmp_path / "t.pcap", [first, answer, late])) == []


def test_a_resegmented_retransmission_is_compared_byte_by_byte(tmp_path):
    stream = TcpStream(40000, 3260)
    frames = [stream.send(b"A" * 50), stream.send(b"B" * 50)]
    frames.append(stream.segment(1025, b"A" * 25 + b"B" * 24 + b"X"))  # straddles both, one byte new
    [found] = rewritten_retransmissions(write_pcap(tmp_path / "t.pcap", frames))
    assert (found.first_frame, found.again_frame, found.seq, found.length, found.differing) == (
        2,
        3,
        1025,
        50,
        1,
    )


def test_sequence_numbers_that_wrap_are_followed(tmp_path):
    stream = TcpStream(40000, 3260)
    stream.seq[True] = (1 << 32) - 30
    frames = [stream.send(b"A" * 100), stream.segment((1 << 32) - 30, b"A" * 30 + b"C" * 70)]
    [found] = rewritten_retransmissions(write_pcap(tmp_path / "t.pcap", frames))
    assert (found.differing, found.length) == (70, 100)


def test_a_new_connection_on_the_same_ports_starts_its_own_sequence_space(tmp_path):
    stream = TcpStream(40000, 3260)
    old = stream.send(b"A" * 100)  # never acknowledged: the connection died
    again = stream.segment(990, b"", flags=0x02)  # a SYN whose ISN lands just below those bytes
    stream.seq[True] = 991
    new = stream.send(b"B" * 100)
    assert rewritten_retransmissions(write_pcap(tmp_path / "t.pcap", [old, again, new])) == []


@pytest.mark.subprocess  # runs tshark through analyze
def test_analyze_warns_and_lists_it_in_json():
    runner = CliRunner()
    printed = runner.invoke(cli, ["analyze", str(GHOST)])
    assert printed.exit_code == 0, printed.output
    assert "1 TCP retransmission(s) carried other bytes" in printed.stderr
    assert "frames 136 and 138" in printed.stderr
    # the analyser names whose bytes they were: the block a ghost write would overwrite
    assert "(write of 4096 bytes at LBA 3936, tag 0x48000000)" in printed.stderr
    as_json = runner.invoke(cli, ["analyze", str(GHOST), "--json"])
    [listed] = json.loads(as_json.stdout)["rewritten_retransmissions"]
    assert (listed["differing"], listed["owner"]) == (1404, "write of 4096 bytes at LBA 3936, tag 0x48000000")


def _record(verify: str) -> ResultRecord:
    return ResultRecord(
        mode="emulated", transport="iser", fabric="iwarp", target_stack="tgt", mtu=1500,
        rw="randwrite", bs=4096, iodepth=4, numjobs=1, verify=verify,
        error="1 blocks failed verification" if verify == "fail" else None,
    )  # fmt: skip


@pytest.mark.parametrize("verify", ["fail", "pass"])
def test_a_run_whose_block_failed_points_at_the_capture_that_shows_why(tmp_path, capsys, verify):
    shutil.copy(GHOST, tmp_path / "a.pcap")
    status = commands_run._report([_record(verify)], tmp_path, as_json=False, captured=True)
    assert status == (1 if verify == "fail" else 0)
    said = capsys.readouterr().err
    if verify == "fail":
        assert "a.pcap: 1 TCP retransmission(s) carried other bytes" in said and "ghost write" in said
    else:  # every block verified: nothing to explain, and no capture is read
        assert "retransmission" not in said

"""sanlab's Lua dissectors under real tshark: hand-built frames, fuzzing, golden captures.

Frames are built byte by byte (pcapgen), written to a pcap, dissected by
``tshark -T json`` with the plugins loaded, and the decoded fields compared
with what was put in.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
from pathlib import Path

import pytest
from pcapgen import TcpStream, roce, write_pcap

from sanlab.dissectors.plugins import tshark_args
from support import require_tool

pytestmark = pytest.mark.tshark


def tshark_json(pcap: Path, *extra: str) -> list[dict[str, list[str]]]:
    """Every field of every frame, flattened: {field name: [values]} per frame; ``extra`` are
    more tshark options (a preference, e.g. a TLS key log)."""
    out = subprocess.run(
        [require_tool("tshark"), *tshark_args(), *extra, "-r", str(pcap), "-T", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    frames = []
    # tshark repeats a key when a frame holds a protocol twice (two FPDUs in one
    # segment); keep every occurrence instead of json's last-one-wins.
    for packet in json.loads(out.stdout or "[]", object_pairs_hook=_Pairs):
        fields: dict[str, list[str]] = {}
        _flatten(dict(packet)["_source"], fields)
        frames.append(fields)
    return frames


class _Pairs(list):  # a JSON object as its (key, value) pairs, duplicates kept
    pass


def _flatten(node: object, into: dict[str, list[str]]) -> None:
    if isinstance(node, _Pairs):
        for key, value in node:
            if isinstance(value, (str, int, float)):
                into.setdefault(key, []).append(str(value))
            else:
                _flatten(value, into)
    elif isinstance(node, list):
        for item in node:
            if not isinstance(item, (str, int, float)):
                _flatten(item, into)


def tshark_text(pcap: Path) -> str:
    out = subprocess.run(
        [require_tool("tshark"), *tshark_args(), "-r", str(pcap), "-V"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.stdout + out.stderr


# --- SRP ---------------------------------------------------------------------


def srp_cmd_read(tag: bytes, lba: int, blocks: int, va: int, key: int, length: int) -> bytes:
    cdb = struct.pack("!BBIBHB", 0x28, 0, lba, 0, blocks, 0) + b"\0" * 6
    head = struct.pack("!BB3xBBB", 0x02, 0, 0x01, 0, 1) + tag + b"\0" * 4
    lun = struct.pack("!H6x", 3)
    return head + lun + b"\0\0\0\0" + cdb + struct.pack("!QII", va, key, length)


def srp_rsp(tag: bytes, status: int, sense: bytes = b"") -> bytes:
    flags = 0x02 if sense else 0
    return (
        struct.pack("!BB2xi", 0xC1, 0, 1)
        + tag
        + struct.pack("!2xBBIIII", flags, status, 0, 0, len(sense), 0)
        + sense
    )


TAG = bytes.fromhex("0102030405060708")


def test_srp_cmd_and_rsp_fields(tmp_path):
    sense = bytes([0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0x00, 0, 0, 0, 0])
    frames = [
        roce(srp_cmd_read(TAG, 0x1234, 8, 0xDEADBEEF000, 0x42, 4096)),
        roce(srp_rsp(TAG, 0x00), a_to_b=False),
        roce(srp_rsp(TAG, 0x02, sense), a_to_b=False),
    ]
    cmd, good, check = tshark_json(write_pcap(tmp_path / "srp.pcap", frames))
    assert cmd["srp_rdma.opcode"] == ["0x02"]
    assert cmd["srp_rdma.tag"] == ["01:02:03:04:05:06:07:08"]
    assert cmd["srp_rdma.lun"] == ["3"]
    assert cmd["srp_rdma.cdb.opcode"] == ["0x28"]
    assert cmd["srp_rdma.cdb.lba"] == [str(0x1234)] and cmd["srp_rdma.cdb.transfer_length"] == ["8"]
    assert cmd["srp_rdma.desc.len"] == ["4096"] and cmd["srp_rdma.desc.key"] == ["0x00000042"]
    assert good["srp_rdma.opcode"] == ["0xc1"] and good["srp_rdma.status"] == ["0x00"]
    assert good["srp_rdma.tag"] == cmd["srp_rdma.tag"]
    assert check["srp_rdma.status"] == ["0x02"] and check["srp_rdma.sense.key"] == ["0x05"]
    assert check["srp_rdma.sense.asc_ascq"] == ["0x2400"]


def test_a_login_iu_in_a_send_is_not_srp_but_a_logout_is(tmp_path):
    """Logins travel in CM private data, never in a SEND: a SEND that starts like one is left alone."""
    rej = struct.pack("!B3xI", 0xC2, 0x00010006) + TAG + b"\0" * 8 + struct.pack("!H6x", 0x0006)
    logout = struct.pack("!B7x", 0x03) + TAG
    a, b = tshark_json(write_pcap(tmp_path / "rej.pcap", [roce(rej, a_to_b=False), roce(logout)]))
    assert "srp_rdma.opcode" not in a
    assert b["srp_rdma.opcode"] == ["0x03"]


def test_non_srp_payload_is_left_alone(tmp_path):
    (frame,) = tshark_json(write_pcap(tmp_path / "x.pcap", [roce(b"\x02\x00\xff" + b"\x11" * 60)]))
    assert "srp_rdma.opcode" not in frame


# --- iWARP ---------------------------------------------------------------------


def fpdu(ddp_rdmap: bytes, payload: bytes) -> bytes:
    ulpdu = ddp_rdmap + payload
    pad = -(2 + len(ulpdu)) % 4
    return struct.pack("!H", len(ulpdu)) + ulpdu + b"\0" * pad + b"\xaa\xbb\xcc\xdd"


def untagged(opcode: int, msn: int) -> bytes:
    return struct.pack("!BBIIII", 0x41, 0x40 | opcode, 0, 0, msn, 0)


def tagged(opcode: int, stag: int, to: int) -> bytes:
    return struct.pack("!BBIQ", 0xC1, 0x40 | opcode, stag, to)


def mpa(key: bytes) -> bytes:
    return key + struct.pack("!BBH", 0x40, 2, 4) + struct.pack("!HH", 0x8010, 0x4010)


def iser_write_cmd(itt: int, lba: int, blocks: int) -> bytes:
    iser_hdr = struct.pack("!B3xIQIQ", 0x10, 0, 0, 0x55, 0x1000)
    cdb = struct.pack("!BBIBHB", 0x2A, 0, lba, 0, blocks, 0) + b"\0" * 6
    bhs = (
        struct.pack("!BB2xB3s8sII", 0x01, 0xA1, 0, b"\0\0\0", b"\0" * 8, itt, blocks * 512) + b"\0" * 8 + cdb
    )
    return iser_hdr + bhs


def test_iser_over_iwarp(tmp_path):
    s = TcpStream(40000, 3260)
    frames = [
        s.send(mpa(b"MPA ID Req Frame")),
        s.send(mpa(b"MPA ID Rep Frame"), from_client=False),
        s.send(fpdu(untagged(3, 1), iser_write_cmd(0x77, 100, 8))),
        s.send(fpdu(untagged(1, 1), struct.pack("!IQIIQ", 0x33, 0, 4096, 0x55, 0x1000)), from_client=False),
        s.send(fpdu(tagged(2, 0x33, 0), b"\x5a" * 512)),
    ]
    req, rep, cmd, rreq, rresp = tshark_json(write_pcap(tmp_path / "iser.pcap", frames))
    assert req["sanlab_iwarp.mpa.rev"] == ["2"] and req["sanlab_iwarp.mpa.ird"] == ["16"]
    assert rep["sanlab_iwarp.mpa.key"] == ["MPA ID Rep Frame"]
    assert cmd["sanlab_iwarp.rdmap.opcode"] == ["3"] and cmd["sanlab_iwarp.ddp.msn"] == ["1"]
    assert cmd["sanlab_iser.iscsi.opcode"] == ["0x01"] and cmd["sanlab_iser.iscsi.itt"] == ["0x00000077"]
    assert cmd["sanlab_iser.scsi.lba"] == ["100"] and cmd["sanlab_iser.scsi.transfer_length"] == ["8"]
    assert rreq["sanlab_iwarp.rdmap.read_size"] == ["4096"]
    assert rresp["sanlab_iwarp.ddp.tagged"] == ["1"] and rresp["sanlab_iwarp.payload_length"] == ["512"]


def test_nvme_over_iwarp(tmp_path):
    s = TcpStream(40001, 4420)
    sqe = bytearray(64)
    sqe[0] = 0x02
    struct.pack_into("<HI", sqe, 2, 5, 1)
    struct.pack_into("<II", sqe, 32, 4096, 0x99)
    struct.pack_into("<QH", sqe, 40, 77, 7)
    cqe = bytearray(16)
    struct.pack_into("<HHHH", cqe, 8, 1, 1, 5, 0)
    frames = [
        s.send(mpa(b"MPA ID Req Frame")),
        s.send(mpa(b"MPA ID Rep Frame"), from_client=False),
        s.send(fpdu(untagged(3, 1), bytes(sqe))),
        s.send(fpdu(untagged(3, 1), bytes(cqe)), from_client=False),
    ]
    _, _, cmd, cpl = tshark_json(write_pcap(tmp_path / "nvme.pcap", frames))
    assert cmd["sanlab_nvmeof.opcode"] == ["0x02"] and cmd["sanlab_nvmeof.cid"] == ["0x0005"]
    assert cmd["sanlab_nvmeof.slba"] == ["77"] and cmd["sanlab_nvmeof.nlb"] == ["7"]
    assert cpl["sanlab_nvmeof.kind"] == ["completion"] and cpl["sanlab_nvmeof.cid"] == ["0x0005"]


# --- fuzz --------------------------------------------------------------------------


def test_truncated_and_corrupted_frames_never_raise_lua_errors(tmp_path):
    rng = random.Random(20261122)
    srp_payloads = [srp_cmd_read(TAG, 1, 8, 1, 2, 4096), srp_rsp(TAG, 2, b"\x70" + b"\0" * 17)]
    frames = []
    for payload in srp_payloads:
        for cut in range(1, len(payload)):
            frames.append(roce(payload[:cut]))
        for _ in range(60):
            noisy = bytearray(payload)
            for _ in range(rng.randint(1, 8)):
                noisy[rng.randrange(1, len(noisy))] = rng.randrange(256)
            frames.append(roce(bytes(noisy)))
    s = TcpStream(40002, 3260)
    frames += [s.send(mpa(b"MPA ID Req Frame")), s.send(mpa(b"MPA ID Rep Frame"), from_client=False)]
    good = fpdu(untagged(3, 1), iser_write_cmd(1, 2, 8))
    for _ in range(150):
        noisy = bytearray(good[: rng.randint(1, len(good))])
        for _ in range(rng.randint(0, 6)):
            noisy[rng.randrange(len(noisy))] = rng.randrange(256)
        frames.append(s.send(bytes(noisy)))
    text = tshark_text(write_pcap(tmp_path / "fuzz.pcap", frames))
    assert "Lua Error" not in text and "lua_error" not in text
    assert "SRP_CMD needs 48 bytes, has 20" in text  # truncation is reported, not hidden

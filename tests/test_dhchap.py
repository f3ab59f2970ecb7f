"""DH-HMAC-CHAP (NVMe in-band authentication) decoded by dhchap.lua on both transports.

The golden captures are sanlab's own (tests/golden/make_captures.py, the
Debian 13 guest, nvmet and the kernel host): ``nvme-auth-tcp`` and
``nvme-auth-rdma`` connect with the secret the target holds (admin queue and
I/O queues each authenticate) and read one block; the ``-wrong`` ones present
another secret, and the connect fails.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from sanlab.dissectors.plugins import tshark_args
from support import REPO, require_tool

pytestmark = [pytest.mark.tshark, pytest.mark.subprocess]
GOLDEN = REPO / "tests" / "golden"
FIELDS = (
    "frame.number", "sanlab_dhchap.message", "sanlab_dhchap.command", "sanlab_dhchap.t_id",
    "sanlab_dhchap.auth_type", "sanlab_dhchap.sc_c", "sanlab_dhchap.napd", "sanlab_dhchap.desc.authid",
    "sanlab_dhchap.desc.hash", "sanlab_dhchap.desc.dhgroup", "sanlab_dhchap.hl", "sanlab_dhchap.hashid",
    "sanlab_dhchap.dhgid", "sanlab_dhchap.dhvlen", "sanlab_dhchap.seqnum", "sanlab_dhchap.cval",
    "sanlab_dhchap.rval", "sanlab_dhchap.cvalid", "sanlab_dhchap.rvalid", "sanlab_dhchap.rescode",
    "sanlab_dhchap.rescode_exp", "sanlab_dhchap.outcome", "_ws.expert.message",
)  # fmt: skip
NEGOTIATE, CHALLENGE, REPLY, SUCCESS1, FAILURE1 = "0x00", "0x01", "0x02", "0x03", "0xf1"
SEND, RECEIVE = "0x05", "0x06"


def messages(capture: str) -> list[dict[str, list[str]]]:
    """Every DH-HMAC-CHAP message tshark with sanlab's plugins finds, its fields by name."""
    argv = [
        require_tool("tshark"),
        *tshark_args(),
        "-r",
        str(GOLDEN / f"{capture}.pcap"),
        "-Y",
        "sanlab_dhchap",
    ]
    argv += ["-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=|"]
    for name in FIELDS:
        argv += ["-e", name]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "Lua" not in out.stderr, out.stderr
    rows = []
    for line in out.stdout.splitlines():
        values = line.split("\t")
        rows.append({name: (v.split("|") if v else []) for name, v in zip(FIELDS, values, strict=False)})
    return rows


def _transactions(rows: list[dict[str, list[str]]]) -> list[list[dict[str, str]]]:
    """The messages in capture order, one per row, grouped by transaction (a queue's T_ID)."""
    found: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        for i, message in enumerate(row["sanlab_dhchap.message"]):
            one = {k: (v[i] if len(v) > i else v[0] if v else "") for k, v in row.items()}
            one["message"] = message
            found.setdefault(one["sanlab_dhchap.t_id"], []).append(one)
    return list(found.values())


@pytest.mark.parametrize("capture", ["nvme-auth-tcp", "nvme-auth-rdma"])
def test_the_right_secret_authenticates_every_queue_field_by_field(capture):
    transactions = _transactions(messages(capture))
    assert len(transactions) >= 2  # the admin queue and at least one I/O queue
    for steps in transactions:
        assert [s["message"] for s in steps] == [NEGOTIATE, CHALLENGE, REPLY, SUCCESS1]
        negotiate, challenge, reply, success1 = steps
        assert [s["sanlab_dhchap.command"] for s in steps] == [SEND, RECEIVE, SEND, RECEIVE]
        # AUTH_Negotiate: no secure channel, one DH-HMAC-CHAP descriptor offering all it can
        assert (negotiate["sanlab_dhchap.auth_type"], negotiate["sanlab_dhchap.sc_c"]) == ("0x00", "0x00")
        assert (negotiate["sanlab_dhchap.napd"], negotiate["sanlab_dhchap.desc.authid"]) == ("1", "0x01")
        row = next(r for r in messages(capture) if NEGOTIATE in r["sanlab_dhchap.message"])
        assert row["sanlab_dhchap.desc.hash"] == ["0x01", "0x02", "0x03"]  # SHA-256, -384, -512
        assert row["sanlab_dhchap.desc.dhgroup"] == ["0x00", "0x01", "0x02", "0x03", "0x04", "0x05"]
        # the Challenge settles on SHA-256 (the secret's hash, DHHC-1:00 means none: the default)
        # and no DH group; a 32-byte challenge and a sequence number
        assert (challenge["sanlab_dhchap.hashid"], challenge["sanlab_dhchap.dhgid"]) == ("0x01", "0x00")
        assert (challenge["sanlab_dhchap.hl"], challenge["sanlab_dhchap.dhvlen"]) == ("32", "0")
        assert len(bytes.fromhex(challenge["sanlab_dhchap.cval"].replace(":", ""))) == 32
        assert int(challenge["sanlab_dhchap.seqnum"]) > 0
        assert "negotiated: hash SHA-256, DH group null" in challenge["sanlab_dhchap.outcome"]
        # the Reply: a 32-byte response; the host does not ask the controller to prove itself
        assert (reply["sanlab_dhchap.hl"], reply["sanlab_dhchap.cvalid"]) == ("32", "0")
        assert len(bytes.fromhex(reply["sanlab_dhchap.rval"].replace(":", ""))) == 32
        assert success1["sanlab_dhchap.rvalid"] == "0" and "accepted" in success1["sanlab_dhchap.outcome"]
        assert not any("failed" in s["_ws.expert.message"] for s in steps)


@pytest.mark.parametrize("capture", ["nvme-auth-tcp-wrong", "nvme-auth-rdma-wrong"])
def test_a_wrong_secret_fails_after_the_reply_and_the_failure_is_expert_info(capture):
    [steps] = _transactions(messages(capture))  # the admin queue's, and no queue after it
    assert [s["message"] for s in steps] == [NEGOTIATE, CHALLENGE, REPLY, FAILURE1]
    failure = steps[-1]
    assert failure["sanlab_dhchap.command"] == RECEIVE  # the controller's answer to the Reply
    assert failure["sanlab_dhchap.auth_type"] == "0x00"  # AUTH_Failure1 is a common message
    assert (failure["sanlab_dhchap.rescode"], failure["sanlab_dhchap.rescode_exp"]) == ("0x01", "0x01")
    assert "FAILED: the controller refused the host's Reply" in failure["sanlab_dhchap.outcome"]
    assert "DH-HMAC-CHAP failed" in failure["_ws.expert.message"]


def test_no_other_golden_capture_is_taken_for_authentication():
    """Block data and every other protocol's PDUs never pass for a DH-HMAC-CHAP message."""
    for pcap in sorted(GOLDEN.glob("*.pcap")):
        if pcap.stem.startswith("nvme-auth"):
            continue
        assert messages(pcap.stem) == [], pcap.name


def _capsule(fctype: int, cid: int, data: bytes) -> bytes:
    """An NVMe/TCP CapsuleCmd holding a fabrics command (Authentication Send 0x05 / Receive 0x06)
    and in-capsule data."""
    sqe = bytes([0x7F, 0]) + cid.to_bytes(2, "little") + bytes([fctype]) + bytes(59)
    return bytes([4, 0, 72, 72 if data else 0]) + (72 + len(data)).to_bytes(4, "little") + sqe + data


def _c2h(cid: int, data: bytes) -> bytes:
    header = cid.to_bytes(2, "little") + bytes(6) + len(data).to_bytes(4, "little") + bytes(4)
    return bytes([7, 0x0C, 24, 24]) + (24 + len(data)).to_bytes(4, "little") + header + data


def test_hand_built_messages_decode_and_corrupted_ones_never_raise_lua_errors(tmp_path):
    """Every message kind, whole, then truncated and corrupted at random: decoded or left alone
    or marked short, never a Lua error; a Success2 and a Failure2 (host to controller) too."""
    import random

    from pcapgen import TcpStream, write_pcap

    challenge = bytes([1, 1, 0, 0, 7, 0, 48, 0, 2, 1]) + (256).to_bytes(2, "little") + bytes(4)
    challenge += bytes(range(48)) + bytes(256)  # SHA-384, ffdhe2048, a DH value
    success2 = bytes([1, 4, 0, 0, 7, 0]) + bytes(10)
    failure2 = bytes([0, 0xF0, 0, 0, 7, 0, 1, 5])  # the host: DH group not usable
    rng = random.Random(52)
    s = TcpStream(40052, 4420)
    frames = [s.send(_capsule(0x06, 1, b"")), s.send(_c2h(1, challenge), from_client=False)]
    frames += [s.send(_capsule(0x05, 2, success2)), s.send(_capsule(0x05, 3, failure2))]
    for cid in range(4, 154):
        cut = challenge[: rng.randint(1, len(challenge))]
        noisy = bytearray(cut)
        for _ in range(rng.randint(0, 6)):
            noisy[rng.randrange(len(noisy))] = rng.randrange(256)
        frames += [s.send(_capsule(0x06, cid, b"")), s.send(_c2h(cid, bytes(noisy)), from_client=False)]
    pcap = write_pcap(tmp_path / "auth.pcap", frames)
    out = subprocess.run(
        [require_tool("tshark"), *tshark_args(), "-r", str(pcap), "-V"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "Lua Error" not in out.stdout and "Lua Error" not in out.stderr
    assert (
        "Hash (HASHID): SHA-384 (0x02)" in out.stdout and "DH group (DHGID): ffdhe2048 (0x01)" in out.stdout
    )
    assert "DH value length (DHVLEN): 256" in out.stdout
    assert "DH-HMAC-CHAP_Success2" in out.stdout and "authenticated" in out.stdout
    assert "the host refused the controller: DH group not usable" in out.stdout
    assert re.search(r"Expert Info \(Error/Malformed\): needs \d+ bytes, has \d+", out.stdout)  # said


@pytest.mark.parametrize("capture", ["nvme-auth-tcp-wrong", "nvme-auth-rdma-wrong"])
def test_the_analyser_counts_authentication_apart_from_login(capture):
    """Authentication Send/Receive and what they carry are 'authentication', on both transports;
    Connect stays 'login'; a refused host made no I/O."""
    from sanlab.dissectors.analyze import analyze

    reading = analyze(GOLDEN / f"{capture}.pcap")
    others = {t.name: t.frames for t in reading.others}
    assert others["authentication"] >= 8 and others["login"] >= 2 and not reading.ios

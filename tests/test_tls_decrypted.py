"""NVMe/TCP inside TLS, opened with the session keys sanlab keeps (tests/golden/nvme-tls.*).

``nvme-tls.pcap`` was made by tests/golden/make_captures.py with the same
QD1 I/Os as ``nvme-tcp.pcap`` (four of each of 4k/16k read/write), on the
Debian 13 guest with tlshd; ``nvme-tls.keylog`` is the key log GnuTLS wrote
for it (a throwaway lab's secrets, shipped as test data).
``nvme-tls-qd4.pcap`` is shipped without its key log.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass

import pytest
from test_dissectors import tshark_json

from sanlab.dissectors.analyze import analyze
from sanlab.dissectors.framing import TLS_HANDSHAKE, TLS_RECORD
from sanlab.dissectors.tls import read_keylog
from sanlab.models.core.transports import ProtocolParams, nvme_tcp
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.loader import load_scenario
from sanlab.scenarios.results.outdir import OutputFolder
from sanlab.targets import nvme_tls
from support import REPO, SCENARIOS, require_tool

GOLDEN = REPO / "tests" / "golden"
TLS, PLAIN, KEYS = GOLDEN / "nvme-tls.pcap", GOLDEN / "nvme-tcp.pcap", GOLDEN / "nvme-tls.keylog"


def _payload_per_io(reading) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """(op, bytes) -> each I/O's TCP payload bytes (a retransmission counted once) and TLS bytes."""
    out: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for io in reading.ios:
        sent = {(f.stream, f.seq, f.tcp_len): f.tcp_len for f in io.frames if f.tcp_len > 0}
        out.setdefault((io.op, io.nbytes), []).append((sum(sent.values()), io.tls_bytes))
    return out


@pytest.mark.tshark
def test_with_its_keys_a_tls_capture_gives_the_plain_recipe_plus_the_records():
    secure, plain = analyze(TLS), analyze(PLAIN)  # the key log beside the capture is found
    assert secure.keylog == str(KEYS) and not secure.encrypted and secure.tls_records == 0
    assert {(g.op, g.bytes, g.count) for g in secure.groups} == {
        (g.op, g.bytes, g.count) for g in plain.groups
    }
    tls, clear = _payload_per_io(secure), _payload_per_io(plain)
    assert set(tls) == {("read", 4096), ("read", 16384), ("write", 4096), ("write", 16384)}
    for cell, ios in tls.items():
        # every I/O carries exactly the plain capture's PDUs plus 22 bytes a record
        assert {payload - extra for payload, extra in ios} == {p for p, _ in clear[cell]}, cell
    by_cell = {(g.op, g.bytes): g for g in secure.groups}
    plain_cell = {(g.op, g.bytes): g for g in plain.groups}
    for cell, records, splits in [
        (("read", 4096), 2, 0),  # CapsuleCmd; C2HData and the corked CapsuleResp in one record
        (("read", 16384), 3, 1),  # C2HData (16,408 B) does not fit one 16 KiB record
        (("write", 4096), 2, 0),
        (("write", 16384), 3, 1),
    ]:
        group = by_cell[cell]
        assert (group.tls_records_per_io, group.tls_splits_per_io) == (records, splits), cell
        assert group.tls_bytes_per_io == records * 22  # 5-byte header, inner type, 16-byte tag
        assert group.round_trips_per_io == plain_cell[cell].round_trips_per_io
    others = {t.name: t.frames for t in secure.others}
    assert others[TLS_HANDSHAKE] > 0 and TLS_RECORD not in others


@pytest.mark.tshark
def test_the_models_tls_bytes_per_io_are_the_records_the_capture_shows():
    measured = {(g.op, g.bytes): g.tls_bytes_per_io for g in analyze(TLS).groups}
    for (op, size), tls_bytes in measured.items():
        sealed, clear = nvme_tcp(op, size, ProtocolParams(tls=True)), nvme_tcp(op, size, ProtocolParams())
        model = sum(m.size for m in sealed.messages) - sum(m.size for m in clear.messages)
        assert model == tls_bytes, (op, size, model, tls_bytes)


@pytest.mark.tshark
@pytest.mark.subprocess
def test_without_keys_the_records_are_counted_and_one_line_says_so(tmp_path):
    bare = tmp_path / "nvme-tls.pcap"
    shutil.copy(TLS, bare)  # no key log beside it
    reading = analyze(bare)
    assert reading.encrypted and not reading.ios and reading.keylog == ""
    assert reading.tls_records > 100
    qd4 = analyze(GOLDEN / "nvme-tls-qd4.pcap")  # shipped without its key log
    assert qd4.encrypted and not qd4.ios and qd4.tls_records > 100
    out = _cli("analyze", str(bare))
    said = [line for line in out.stdout.splitlines() if "TLS" in line and "key log" in line]
    assert len(said) == 1 and f"{reading.tls_records:,} TLS records counted" in said[0], out.stdout


@pytest.mark.tshark
@pytest.mark.subprocess
def test_another_sessions_key_log_opens_nothing(tmp_path):
    other = tmp_path / "other.keylog"
    other.write_text(
        "".join(
            f"{label} {'ab' * 32} {'cd' * 32}\n"
            for label in ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")
        )
    )
    reading = analyze(TLS, keylog=other)
    assert reading.encrypted and not reading.ios
    out = _cli("analyze", str(TLS), "--keylog", str(other))
    assert "its key log did not open them" in out.stdout


@pytest.mark.tshark
def test_tshark_with_the_plugins_and_the_key_log_decodes_nvme_tcp_inside_tls():
    require_tool("tshark")
    frames = tshark_json(TLS, "-o", f"tls.keylog_file:{KEYS}")
    kinds = [f.get("nvme-tcp.type", [""])[0] for f in frames if "nvme-tcp.type" in f]
    assert kinds.count("4") >= 16 and kinds.count("5") >= 8 and "7" in kinds  # cmds, resps, C2HData
    bare = tshark_json(TLS)  # without the keys: TLS records, never a PDU of type 22
    assert not [f for f in bare if "nvme-tcp.type" in f]
    assert [f for f in bare if "tls.record.content_type" in f]


def test_a_key_log_that_is_not_one_is_refused_in_one_line(tmp_path):
    junk = tmp_path / "junk.keylog"
    junk.write_text("hello\n")
    with pytest.raises(SanlabError, match="no TLS secrets in it"):
        read_keylog(junk)
    assert len(read_keylog(KEYS)) >= 1


@dataclass
class _Done:
    ok: bool


class _Guest:
    """A guest whose tlshd wrote a key log: what Host.get returns, and what was run."""

    def __init__(self, name: str, keys: bytes):
        self.name, self.keys, self.commands = name, keys, []

    def run(self, command, timeout=60.0, stdin=""):
        self.commands.append(command)
        return _Done(bool(self.keys))

    def get(self, path: str) -> bytes:
        assert path == nvme_tls.KEYLOG
        return self.keys


def test_the_key_log_is_kept_beside_the_capture_for_root_alone(tmp_path):
    scenario = load_scenario(SCENARIOS / "nvme-tls.yaml")
    secret = KEYS.read_bytes()
    folder = OutputFolder.open(tmp_path, "--out")
    guests = [_Guest("initiator", secret), _Guest("target", secret)]
    names = nvme_tls.keep_keys(scenario, guests, folder)  # type: ignore[arg-type]
    assert names == ["eth.keylog"]
    kept = tmp_path / "eth.keylog"
    mode = stat.S_IMODE(kept.stat().st_mode)
    assert mode == 0o600, oct(mode)  # never group- or world-readable, from its creation
    assert kept.read_bytes() == nvme_tls.merged_key_logs([secret])
    # the secrets were read with Host.get, never through a command's output
    assert not any(b"SECRET" in str(c).encode() or "cat " in str(c) for g in guests for c in g.commands)
    assert secret.split()[2].decode() not in (tmp_path / ".sanlab-manifest.json").read_text(errors="replace")


def test_tlshd_writes_its_key_log_with_a_umask_that_keeps_it_roots():
    from sanlab.targets.dryrun import DryRunHost

    host = DryRunHost("target")
    nvme_tls.start_tlshd(host)
    script = "\n".join(host.commands)
    assert f"(umask 077; SSLKEYLOGFILE={nvme_tls.KEYLOG} setsid tlshd" in script


@pytest.mark.tshark
@pytest.mark.subprocess
def test_the_secrets_never_reach_the_terminal_or_the_json(tmp_path):
    secrets = {line.split()[2] for line in KEYS.read_text().splitlines() if line.strip()}
    randoms = {line.split()[1] for line in KEYS.read_text().splitlines() if line.strip()}
    for args in (("analyze", str(TLS)), ("analyze", str(TLS), "--json")):
        out = _cli(*args)
        assert out.returncode == 0, out.stderr
        for secret in secrets | randoms:
            assert secret not in out.stdout and secret not in out.stderr
        assert any(s in KEYS.read_text() for s in secrets)  # the test looks for what is there


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "sanlab", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_tshark_gets_the_key_logs_path_never_its_secrets():
    from sanlab.dissectors.tshark import tshark_argv

    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")
    argv = " ".join(tshark_argv(TLS, (), keylog=KEYS))
    assert f"tls.keylog_file:{KEYS}" in argv
    assert not any(line.split()[2] in argv for line in KEYS.read_text().splitlines() if line.strip())

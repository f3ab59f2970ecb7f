"""NVMe/TCP inside TLS 1.3 on the Debian 13 guest, and the analyser that will not mis-read it.

``scenarios/nvme-tls.yaml`` exports an NVMe/TCP target with ``tls: true``:
a fresh configured PSK goes into both kernels' ``.nvme`` keyrings, tlshd
does the handshakes, nvmet's port asks for TLS and the host connects with
``--tls``.  Verified writes go through; a host holding another PSK fails
the handshake.  Its capture is TLS records, which Wireshark's NVMe/TCP
dissector reads as PDUs of unknown type 22 (a TLS handshake's first
byte); sanlab's analyser frames the records and says the stream is
encrypted.
"""

from __future__ import annotations

import copy
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from sanlab.dissectors.analyze import analyze
from sanlab.dissectors.framing import TLS_RECORD, NvmeQueue, NvmeTcpFramer, starts_tls
from sanlab.emulator.blueprint import blueprint
from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import load_scenario, parse_scenario
from sanlab.targets import nvme_tls, rehearsal
from sanlab.targets.dryrun import DryRunHost
from support import SCENARIOS, require_tool, run_scenario

TLS = SCENARIOS / "nvme-tls.yaml"


def _data() -> dict:
    return yaml.safe_load(TLS.read_text())


def test_a_fresh_psk_is_a_configured_psk_in_the_interchange_format():
    psk = nvme_tls.new_psk()
    data = copy.deepcopy(_data())
    data["targets"][0]["tls"] = {"psk": psk}
    assert parse_scenario(data, "tls.yaml").targets[0].tls.psk == psk  # the schema takes it
    assert psk != nvme_tls.new_psk()


def test_both_ends_hold_the_psk_the_port_asks_for_tls_and_the_host_connects_with_it():
    scenario = load_scenario(TLS)
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearsal.rehearse(scenario, hosts, blueprint(scenario, "x", Path("/x"), None).endpoints)
    target, initiator = ("\n".join(hosts[h].commands) for h in ("target", "initiator"))
    pair = (
        "--hostnqn=nqn.2026-11.org.sanlab:nvme-tls.host.initiator --subsysnqn=nqn.2026-11.org.sanlab:nvme-tls"
    )
    for side in (target, initiator):
        assert f"nvme check-tls-key {pair} --identity=1 --keydata=NVMeTLSkey-1:01:" in side
        assert "setsid tlshd -c /run/sanlab-tlshd.conf" in side and "keyctl invalidate" in side
    assert "echo tls1.3 > /sys/kernel/config/nvmet/ports/1/addr_tsas" in target
    keys = [
        line.split("--keydata=")[1].split()[0]
        for line in (target + initiator).splitlines()
        if "--keydata=" in line
    ]
    assert len(keys) == 2 and keys[0] == keys[1]  # one PSK, made for this export, on both ends
    assert "--hostnqn=nqn.2026-11.org.sanlab:nvme-tls.host.initiator --tls" in initiator


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(guest="debian-12"), "targets[0].tls: NVMe/TCP TLS needs guest debian-13"),
        (
            lambda d: d["links"][0].update(fabric="roce") or d["targets"][0].update(transport="nvme-rdma"),
            "targets[0].tls: TLS is NVMe/TCP's (nvme-tcp); not nvme-rdma",
        ),
        (lambda d: d["targets"][0].update(tls={"psk": "NVMeTLSkey-1:01:$(reboot):"}), "targets[0].tls"),
        (
            lambda d: d["hosts"][0].update(ssh="root@10.0.0.1"),
            "TLS is configured on sanlab's guests only",
        ),
    ],
)
def test_tls_mistakes_are_named_before_anything_boots(change, expected):
    data = copy.deepcopy(_data())
    change(data)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data, "tls.yaml")
    assert expected in str(err.value)


def test_a_stream_that_begins_with_a_tls_record_is_framed_as_records():
    handshake = bytes([22, 3, 1, 0, 4]) + b"\x01\x00\x00\x00"
    data = bytes([23, 3, 3, 0, 20]) + bytes(20)
    framer = NvmeTcpFramer(NvmeQueue())
    records = framer.pdus(handshake + data + data[:7])  # the last record is not all here yet
    assert [(r.start, r.end, r.category) for r in records] == [(0, 9, TLS_RECORD), (9, 34, TLS_RECORD)]
    icreq = bytes([0, 0, 128, 0, 128, 0, 0, 0]) + bytes(120)  # NVMe/TCP's first PDU: never TLS
    assert starts_tls(handshake[:3]) and not starts_tls(icreq[:3])
    assert NvmeTcpFramer(NvmeQueue()).pdus(icreq)[0].category == "connection"


@pytest.mark.vm
@pytest.mark.long  # needs the Debian 13 image (a 100-165 s build in CI): benchmarks/long_vm_tests.py
def test_tls_carries_verified_writes_a_wrong_psk_fails_and_the_keys_open_the_capture(
    debian_13_image, tmp_path
):
    require_tool("tshark")
    data = copy.deepcopy(_data())
    data["targets"].append(
        dict(
            data["targets"][0],
            name="wrong-psk",
            tls={"psk": nvme_tls.new_psk(), "initiator_psk": nvme_tls.new_psk()},
        )
    )
    result, out = run_scenario(data, tmp_path, timeout=900)
    records = yaml.safe_load(result.stdout)["results"]
    good, wrong = records
    assert good["error"] is None and good["verify"] == "pass" and good["verified_bytes"] == 8 << 20, good
    assert wrong["error"] and "nvme connect to nqn.2026-11.org.sanlab:wrong-psk" in wrong["error"], wrong
    assert wrong["iops"] is None  # no fio ran: nothing written
    keylog = out / "eth.keylog"  # the session keys, beside the capture, root's alone
    assert stat.S_IMODE(keylog.stat().st_mode) == 0o600
    secrets = {line.split()[2] for line in keylog.read_text().splitlines() if line.strip()}
    assert secrets
    for path in (p for p in out.rglob("*") if p.is_file() and p != keylog and p.suffix != ".pcap"):
        text = path.read_bytes().decode("latin-1")
        assert not [s for s in secrets if s in text], f"a TLS secret is in {path}"
    assert not [s for s in secrets if s in result.stdout + result.stderr]  # nor on the terminal
    reading = analyze(out / "eth.pcap")  # opened with the key log beside it
    assert not reading.encrypted and len(reading.ios) >= 2048  # the 8 MiB of 4k verified writes
    assert {g.tls_records_per_io for g in reading.groups} and all(g.tls_bytes_per_io for g in reading.groups)
    bare = tmp_path / "bare.pcap"
    shutil.copy(out / "eth.pcap", bare)  # without its keys: records, not PDUs; no I/O is made up
    reading = analyze(bare)
    assert reading.encrypted and not reading.ios
    tls_frames = next(t.frames for t in reading.others if t.name == TLS_RECORD)
    assert tls_frames > 1000


def test_the_model_charges_tls_its_aead_per_byte_on_both_hosts_and_its_records_on_the_wire():
    from sanlab.models.core.network import Point, build, encrypted_bytes
    from sanlab.models.core.profile_files import load_stacks
    from sanlab.models.core.reach import TLS_UNCHECKED, past
    from sanlab.models.core.transports import ProtocolParams, sealed

    plain = Point("nvme-tcp", "eth", 100, "randwrite", 128 << 10, 32, 4)
    secure = Point("nvme-tcp", "eth", 100, "randwrite", 128 << 10, 32, 4, tls=True)
    parts = {hop: us for s in build(secure).stations for hop, us in s.parts}
    assert {"initiator-tls", "target-tls"} <= set(parts)
    assert not {"initiator-tls", "target-tls"} & {hop for s in build(plain).stations for hop, _ in s.parts}
    cycles = load_stacks().tls.cycles_per_byte
    assert cycles == 0.64  # Drucker, Gueron and Krasnov 2018 (models/stacks.yaml)
    assert encrypted_bytes(secure, 4) > 128 << 10 and encrypted_bytes(plain, 4) == 0
    # each record of at most 16 KiB adds a 5-byte header, a content-type byte and a 16-byte tag
    on = ProtocolParams(tls=True)
    assert (sealed(4096, on), sealed(65536, on), sealed(4096, ProtocolParams())) == (4118, 65624, 4096)
    assert build(secure).wire.wire_out > build(plain).wire.wire_out
    assert past(secure, 1.0) == TLS_UNCHECKED  # a TLS projection always says it is unchecked


def test_a_tls_projection_on_another_transport_is_refused():
    data = {
        "projections": [{"transport": "iscsi", "fabric": "eth", "tls": True}],
        "workloads": [{"rw": "randread", "bs": "4k"}],
    }
    with pytest.raises(
        ScenarioError, match=r"projections\[0\]\.tls: TLS is NVMe/TCP's \(nvme-tcp\), not iscsi"
    ):
        parse_scenario(data, "p.yaml")

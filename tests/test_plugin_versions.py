"""Which Wireshark sanlab's Lua plugins are tested with, run on the machine's own tshark.

Each plugin says in its header (and, for dhchap.lua, in its protocol's
description) the Wireshark versions it is tested with; the tests run the
plugins on the tshark this machine has, so a newer tshark fails here until
someone has checked the plugins on it and added its version.  Where
Wireshark decodes a protocol itself, the plugin steps aside: a stand-in
"newer Wireshark" (a script that registers what such a release registers)
shows that each one does.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from sanlab.dissectors.plugins import PLUGINS, plugin_dir, tshark_args
from support import REPO, require_tool

pytestmark = pytest.mark.tshark
GOLDEN = REPO / "tests" / "golden"
TESTED = re.compile(r"^-- Tested with: Wireshark/tshark ([0-9., ]+)", re.M)


def _tshark_version() -> str:
    out = subprocess.run([require_tool("tshark"), "--version"], capture_output=True, text=True, timeout=60)
    return re.search(r"TShark \(Wireshark\) (\d+\.\d+\.\d+)", out.stdout).group(1)  # type: ignore[union-attr]


def _tshark(*args: str, before: list[Path] = (), said: list[str] | None = None) -> str:
    """tshark's stdout with sanlab's plugins (``before``: scripts loaded ahead of them); its
    stderr goes to ``said``."""
    extra = [a for path in before for a in ("-X", f"lua_script:{path}")]
    out = subprocess.run(
        [require_tool("tshark"), *extra, *tshark_args(), *args], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "Lua: Error" not in out.stderr and "syntax error" not in out.stderr, out.stderr
    if said is not None:
        said.append(out.stderr)
    return out.stdout


@pytest.mark.subprocess
def test_every_plugin_names_the_versions_it_is_tested_with_and_this_tshark_is_one():
    version = _tshark_version()
    for name in PLUGINS:
        if name == "scsi.lua":  # a module the others load, not a dissector
            continue
        found = TESTED.search((plugin_dir() / name).read_text())
        assert found, f"{name} does not say which Wireshark it is tested with"
        versions = [v.strip() for v in found.group(1).split(",")]
        assert version in versions, f"{name}: tested with {versions}; this machine's tshark is {version}"
    assert f'TESTED_WITH = {{ "{version}" }}' in (plugin_dir() / "dhchap.lua").read_text()


@pytest.mark.subprocess
def test_the_plugins_say_at_load_which_version_they_run_on():
    version = _tshark_version()
    detail = _tshark("-r", str(GOLDEN / "nvme-auth-tcp.pcap"), "-Y", "sanlab_dhchap", "-V", "-c", "40")
    assert f"Decoded by: sanlab dhchap.lua, tested with Wireshark {version}; running {version}" in detail


@pytest.mark.subprocess
def test_sanlabs_mpa_v2_decoding_leaves_no_expert_warning_on_siw_captures():
    """Wireshark 4.0's MPA dissector predates MPA v2 and warns of siw's start-up frames (Rev
    and Res fields); sanlab's plugin takes those streams, and its own decoding is clean."""
    bare = subprocess.run(
        [require_tool("tshark"), "-r", str(GOLDEN / "iser-siw.pcap"), "-q", "-z", "expert,warn"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "IWARP_MPA" in bare  # without the plugin the built-in dissector does warn
    for name in ("iser-siw", "nvme-rdma-siw", "iser-siw-qd4", "nvme-rdma-siw-qd4"):
        out = _tshark("-r", str(GOLDEN / f"{name}.pcap"), "-q", "-z", "expert,warn")
        rows = [line for line in out.splitlines() if re.match(r"^\s+\d+\s", line)]
        assert not [r for r in rows if "IWARP_MPA" in r or "SANLAB" in r.upper()], (name, rows)


@pytest.mark.subprocess
def test_the_tls_hand_off_steps_aside_where_wireshark_registers_nvme_tls(tmp_path):
    keys = GOLDEN / "nvme-tls.keylog"
    ours = _tshark("-r", str(GOLDEN / "nvme-tls.pcap"), "-o", f"tls.keylog_file:{keys}", "-T", "fields",
                   "-e", "nvme-tcp.type")  # fmt: skip
    assert "4" in ours.split()  # the plugin's hand-off: NVMe/TCP commands read inside TLS
    newer = tmp_path / "newer.lua"  # what a newer Wireshark registers: a dissector named nvme-tls
    newer.write_text('local p = Proto("nvme-tls", "stand-in")\nfunction p.dissector() return 0 end\n')
    aside = _tshark("-r", str(GOLDEN / "nvme-tls.pcap"), "-o", f"tls.keylog_file:{keys}", "-T", "fields",
                    "-e", "nvme-tcp.type", before=[newer])  # fmt: skip
    assert "4" not in aside.split()  # stepped aside: the stand-in "native" one was left to do it


@pytest.mark.subprocess
def test_dhchap_steps_aside_where_wireshark_has_dhchap_fields(tmp_path):
    capture = str(GOLDEN / "nvme-auth-tcp.pcap")
    assert "DH-HMAC-CHAP_Challenge" in _tshark("-r", capture, "-T", "fields", "-e", "_ws.col.Info")
    newer = tmp_path / "newer.lua"
    newer.write_text(
        'local p = Proto("nvme_native", "stand-in")\n'
        'p.fields = { ProtoField.uint8("nvme.auth.dhchap.stub", "stub") }\n'
    )
    said: list[str] = []
    aside = _tshark("-r", capture, "-T", "fields", "-e", "_ws.col.Info", before=[newer], said=said)
    assert "DH-HMAC-CHAP_Challenge" not in aside
    assert "dhchap.lua: stepped aside: this Wireshark decodes DH-HMAC-CHAP (nvme.auth.dhchap.stub)" in said[0]

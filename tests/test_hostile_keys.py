"""Hostile keys, yes/no values and CHAP settings: each refused in one line before anything boots,
or really set on the target.

- DH-HMAC-CHAP secrets and TLS PSKs are checked as nvme-cli and libnvme check them
  (scenarios/nvme_keys.py): the hash, the key's length for that hash, canonical base64, the
  CRC-32.  Every bad key below was accepted by ``validate`` before.
- A yes/no is YAML's true or false: ``tls: "yes"`` and ``tls: 1`` were read as true.
- CHAP on tgt was never set on the target: now an account is made and bound, and a name tgt
  cannot hold is refused.
- Process identity: a path names our process only as a whole argument or a parsed value.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import shlex
import struct
import zlib
from pathlib import Path

import pytest
import yaml

from sanlab.emulator.blueprint import blueprint
from sanlab.emulator.processes import names_path, option_values
from sanlab.scenarios.errors import ScenarioError
from sanlab.scenarios.loader import parse_scenario
from sanlab.scenarios.nvme_keys import check_dhchap_secret, check_tls_psk, interchange
from sanlab.targets import rehearsal
from sanlab.targets.dryrun import DryRunHost
from support import SCENARIOS, sanlab_here

AUTH = yaml.safe_load((SCENARIOS / "nvme-auth.yaml").read_text())
TLS = yaml.safe_load((SCENARIOS / "nvme-tls.yaml").read_text())


def _key(size: int, seed: str = "sanlab") -> bytes:
    """``size`` fixed bytes (a test that fails shows the same key each time)."""
    return (hashlib.sha512(seed.encode()).digest() * 2)[:size]


def _encoded(prefix: str, hash_id: str, raw: bytes) -> str:
    return f"{prefix}:{hash_id}:{base64.b64encode(raw).decode()}:"


def _with_crc(key: bytes) -> bytes:
    return key + struct.pack("<I", zlib.crc32(key))


def _stray_bits(secret: str) -> str:
    """``secret`` with the unused low bits of its last base64 digit set: the same bytes to a
    lax decoder (nvme-cli's drops them), but not as any encoder writes them."""
    head, digit = secret[:-4], secret[-4]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    assert secret.endswith("==:") and alphabet.index(digit) % 16 == 0
    return head + alphabet[alphabet.index(digit) + 5] + "==:"


def _auth(secret: object, field: str = "secret") -> dict:
    data = copy.deepcopy(AUTH)
    data["targets"][0]["auth"] = {"secret": interchange("DHHC-1", 0, _key(32)), field: secret}
    return data


def _tls(value: object) -> dict:
    data = copy.deepcopy(TLS)
    data["targets"][0]["tls"] = value
    return data


def _refused(data: dict, field: str, words: str) -> None:
    """Refused before anything boots: one line naming the file, the field and what is wrong."""
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data, "hostile.yaml")
    said = str(err.value)
    line = next((x for x in said.splitlines() if f"hostile.yaml: {field}:" in x), None)
    assert line is not None, said
    assert words in line, said
    assert len(line) < 400 and "Traceback" not in said


# --- DH-HMAC-CHAP secrets -------------------------------------------------------------------

GOOD_DHCHAP = [(h, n) for h, n in [(0, 32), (0, 48), (0, 64), (1, 32), (2, 48), (3, 64)]]


@pytest.mark.parametrize(("hash_id", "size"), GOOD_DHCHAP, ids=[f"{h:02x}-{n}" for h, n in GOOD_DHCHAP])
def test_a_dhchap_secret_nvme_cli_takes_is_taken(hash_id, size):
    secret = interchange("DHHC-1", hash_id, _key(size))
    # nvme-cli's check_dhchap_key() wants the whole string this long for hashes 01-03
    assert len(secret) == {32: 59, 48: 83, 64: 103}[size]
    assert parse_scenario(_auth(secret), "ok.yaml").targets[0].auth.secret == secret


DHCHAP_FIELD = "targets[0].auth.secret"
BAD_DHCHAP = {
    "crc-of-another-key": (
        _encoded("DHHC-1", "00", _key(32) + struct.pack("<I", zlib.crc32(_key(32, "other")))),
        "CRC-32 does not match",
    ),
    "crc-big-endian": (
        _encoded("DHHC-1", "00", _key(32) + struct.pack(">I", zlib.crc32(_key(32)))),
        "CRC-32",
    ),
    "key-byte-flipped": (
        _encoded("DHHC-1", "01", bytes([_key(32)[0] ^ 1]) + _with_crc(_key(32))[1:]),
        "CRC-32 does not match",
    ),
    "no-crc-at-all": (_encoded("DHHC-1", "00", _key(48)[:36]), "CRC-32 does not match"),
    "sha256-with-48-bytes": (interchange("DHHC-1", 1, _key(48)), "holds a 32-byte key; this one holds 48"),
    "sha256-with-64-bytes": (interchange("DHHC-1", 1, _key(64)), "holds a 32-byte key; this one holds 64"),
    "sha384-with-32-bytes": (interchange("DHHC-1", 2, _key(32)), "holds a 48-byte key; this one holds 32"),
    "sha512-with-48-bytes": (interchange("DHHC-1", 3, _key(48)), "holds a 64-byte key; this one holds 48"),
    "none-with-40-bytes": (interchange("DHHC-1", 0, _key(40)), "32 or 48 or 64-byte key; this one holds 40"),
    "none-with-33-bytes": (interchange("DHHC-1", 0, _key(33)), "this one holds 33"),
    "missing-padding": (interchange("DHHC-1", 2, _key(48)).replace("==:", ":"), "not base64"),
    "stray-bits": (_stray_bits(interchange("DHHC-1", 2, _key(48))), "not base64 as nvme-cli prints it"),
    "truncated-by-4": (interchange("DHHC-1", 0, _key(32))[:-5] + ":", "this one holds 29"),
    "url-safe-alphabet": (interchange("DHHC-1", 0, _key(32)).replace("+", "-").replace("/", "_"), ""),
    "space-inside": (
        interchange("DHHC-1", 0, _key(32))[:20] + " " + interchange("DHHC-1", 0, _key(32))[21:],
        "",
    ),
    "trailing-newline": (interchange("DHHC-1", 0, _key(32)) + "\n", "DHHC-1"),
    "leading-space": (" " + interchange("DHHC-1", 0, _key(32)), "DHHC-1"),
    "no-final-colon": (interchange("DHHC-1", 0, _key(32))[:-1], "DHHC-1"),
    "hash-04": (interchange("DHHC-1", 4, _key(32)), "DHHC-1"),
    "hash-ff": (interchange("DHHC-1", 255, _key(32)), "DHHC-1"),
    "version-2": (interchange("DHHC-2", 0, _key(32)), "DHHC-1"),
    "lower-case-prefix": (interchange("dhhc-1", 0, _key(32)), "DHHC-1"),
    "a-tls-psk": (interchange("NVMeTLSkey-1", 1, _key(32)), "DHHC-1"),
    "empty": ("", "DHHC-1"),
    "a-number": (12345, ""),
}


@pytest.mark.parametrize(("secret", "words"), BAD_DHCHAP.values(), ids=BAD_DHCHAP.keys())
def test_a_dhchap_secret_nvme_cli_refuses_is_refused(secret, words):
    if isinstance(secret, str):
        with pytest.raises(ValueError):
            check_dhchap_secret(secret)
    _refused(_auth(secret), DHCHAP_FIELD, words)


def test_the_hosts_own_secret_is_checked_too():
    bad = _encoded("DHHC-1", "00", _key(32) + b"\0\0\0\0")
    _refused(_auth(bad, "initiator_secret"), "targets[0].auth.initiator_secret", "CRC-32 does not match")


# --- TLS PSKs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("hash_id", "size"), [(1, 32), (2, 48)])
def test_a_psk_libnvme_takes_is_taken(hash_id, size):
    psk = interchange("NVMeTLSkey-1", hash_id, _key(size))
    assert len(psk) == {32: 65, 48: 89}[size]  # libnvme's nvme_import_tls_key_versioned()
    assert parse_scenario(_tls({"psk": psk}), "ok.yaml").targets[0].tls.psk == psk


TLS_FIELD = "targets[0].tls.psk"
BAD_PSK = {
    "crc-wrong": (_encoded("NVMeTLSkey-1", "01", _key(32) + b"\x01\x02\x03\x04"), "CRC-32 does not match"),
    "crc-of-48-bytes-cut": (
        _encoded("NVMeTLSkey-1", "01", _with_crc(_key(48))[:32] + _with_crc(_key(48))[-4:]),
        "CRC-32",
    ),
    "sha256-with-48-bytes": (
        interchange("NVMeTLSkey-1", 1, _key(48)),
        "holds a 32-byte key; this one holds 48",
    ),
    "sha384-with-32-bytes": (
        interchange("NVMeTLSkey-1", 2, _key(32)),
        "holds a 48-byte key; this one holds 32",
    ),
    "hash-00": (interchange("NVMeTLSkey-1", 0, _key(32)), "NVMeTLSkey-1"),
    "hash-03": (interchange("NVMeTLSkey-1", 3, _key(64)), "NVMeTLSkey-1"),
    "version-2": (interchange("NVMeTLSkey-2", 1, _key(32)), "NVMeTLSkey-1"),
    "a-dhchap-secret": (interchange("DHHC-1", 1, _key(32)), "NVMeTLSkey-1"),
    "non-base64": (
        interchange("NVMeTLSkey-1", 1, _key(32))[:20] + "*" + interchange("NVMeTLSkey-1", 1, _key(32))[21:],
        "",
    ),
    "tab-inside": (
        interchange("NVMeTLSkey-1", 1, _key(32))[:20] + "\t" + interchange("NVMeTLSkey-1", 1, _key(32))[21:],
        "",
    ),
    "truncated": (interchange("NVMeTLSkey-1", 1, _key(32))[:40], "NVMeTLSkey-1"),
    "sha384-missing-padding": (interchange("NVMeTLSkey-1", 2, _key(48)).replace("==:", ":"), "not base64"),
}


@pytest.mark.parametrize(("psk", "words"), BAD_PSK.values(), ids=BAD_PSK.keys())
def test_a_psk_libnvme_refuses_is_refused(psk, words):
    with pytest.raises(ValueError):
        check_tls_psk(psk)
    _refused(_tls({"psk": psk}), TLS_FIELD, words)


def test_the_hosts_own_psk_is_checked_too():
    good = interchange("NVMeTLSkey-1", 1, _key(32))
    bad = _encoded("NVMeTLSkey-1", "01", _key(32) + b"\0\0\0\0")
    _refused(_tls({"psk": good, "initiator_psk": bad}), "targets[0].tls.initiator_psk", "CRC-32")


def test_sanlabs_own_fresh_psk_passes_its_own_check():
    from sanlab.targets.nvme_tls import new_psk

    assert check_tls_psk(new_psk())


# --- yes/no values ---------------------------------------------------------------------------

NOT_A_YES_NO = {
    "tls-yes-string": ("yes", "'yes' is a string, not a valid boolean"),
    "tls-true-string": ("true", "'true' is a string"),
    "tls-on-string": ("on", "'on' is a string"),
    "tls-empty-string": ("", "'' is a string"),
    "tls-one": (1, "1 is a number, not a valid boolean"),
    "tls-zero": (0, "0 is a number"),
    "tls-one-point-zero": (1.0, "1.0 is a number"),
}


@pytest.mark.parametrize(("value", "words"), NOT_A_YES_NO.values(), ids=NOT_A_YES_NO.keys())
def test_tls_takes_true_or_false_only(value, words):
    _refused(_tls(value), "targets[0].tls", words)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (lambda d: d["targets"][0], {"header_digest": "true"}),
        (lambda d: d["targets"][0], {"data_digest": 1}),
        (lambda d: d["targets"][0], {"destroy": "no"}),
        (lambda d: d, {"capture": "yes"}),
        (lambda d: d, {"projections": [{"transport": "nvme-tcp", "fabric": "eth", "tls": "yes"}]}),
    ],
    ids=["header-digest", "data-digest", "destroy", "capture", "projection-tls"],
)
def test_every_yes_no_takes_true_or_false_only(where, value):
    data = copy.deepcopy(TLS)
    where(data).update(value)
    with pytest.raises(ScenarioError, match="is a (string|number), not a valid boolean"):
        parse_scenario(data, "hostile.yaml")


def test_yaml_unquoted_yes_and_no_are_booleans_and_quoted_ones_are_text(tmp_path):
    """YAML 1.1 (PyYAML, which sanlab reads with) makes unquoted yes/no booleans before the
    schema sees them; sanlab takes them as YAML gives them.  Quoted, they are text: refused."""
    text = (SCENARIOS / "nvme-tls.yaml").read_text()
    for written, ok in (("tls: yes", True), ("tls: no", True), ('tls: "yes"', False), ("tls: 'on'", False)):
        path = tmp_path / "s.yaml"
        path.write_text(text.replace("tls: true", written))
        result = sanlab_here("validate", str(path))
        assert (result.returncode == 0) is ok, (written, result.stdout, result.stderr)
        if not ok:
            lines = [x for x in (result.stdout + result.stderr).splitlines() if x.strip()]
            assert len(lines) == 1 and f"{path}: targets[0].tls:" in lines[0], lines


# --- CHAP on tgt --------------------------------------------------------------------------------


def _chap_scenario(stack: str, transport: str = "iscsi", **chap: str) -> dict:
    fabric = "roce" if transport == "iser" else "eth"
    return {
        "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
        "links": [{"name": "l", "endpoints": ["initiator", "target"], "fabric": fabric}],
        "targets": [
            {
                "name": "t",
                "host": "target",
                "stack": stack,
                "transport": transport,
                "chap": {"username": "alice", "password": "twelve-chars", **chap},
            }
        ],
        "workloads": [{"rw": "randread", "bs": "4k"}],
    }


def _rehearsed(data: dict) -> dict[str, list[str]]:
    scenario = parse_scenario(data, "chap.yaml")
    hosts = {h.name: DryRunHost(h.name) for h in scenario.hosts}
    rehearsal.rehearse(scenario, hosts, blueprint(scenario, "x", Path("/x"), None).endpoints)
    return {name: "\n".join(host.commands).splitlines() for name, host in hosts.items()}


@pytest.mark.parametrize("transport", ["iscsi", "iser"])
def test_chap_on_tgt_is_an_account_bound_to_the_target(transport):
    lines = _rehearsed(_chap_scenario("tgt", transport))["target"]
    lld = "iser" if transport == "iser" else "iscsi"
    new = f"tgtadm --lld {lld} --op new --mode account --user alice --password twelve-chars"
    bind = f"tgtadm --lld {lld} --op bind --mode account --tid 1 --user alice"
    assert new in lines and bind in lines
    assert lines.index(bind) > lines.index(new) > lines.index(next(x for x in lines if "--mode target" in x))


@pytest.mark.parametrize(
    "secret", ["$(touch${IFS}p)", "`id`-aaaaaaaa", "a'b;c|d&e<f>g", "-starts-dash", "x,comma,inside"]
)
def test_a_tgt_chap_secret_reaches_tgtadm_as_one_argument(secret):
    lines = _rehearsed(_chap_scenario("tgt", username="-user:with.x", password=secret))["target"]
    new = next(x for x in lines if "--mode account" in x and "--op new" in x)
    assert shlex.split(new)[-4:] == ["--user", "-user:with.x", "--password", secret]


def test_a_chap_name_tgt_cannot_hold_is_refused_in_one_line():
    _refused(
        _chap_scenario("tgt", username="ali,ce"), "targets[0].chap.username", "tgt cannot hold a CHAP name"
    )
    assert parse_scenario(_chap_scenario("lio", username="ali,ce"), "lio.yaml")  # LIO holds it


@pytest.mark.parametrize(
    ("chap", "field"),
    [
        ({"password": "eleven-char"}, "targets[0].chap.password"),
        ({"password": "seventeen-chars-x"}, "targets[0].chap.password"),
        ({"username": "a b"}, "targets[0].chap.username"),
    ],
    ids=["password-short", "password-long", "name-space"],
)
def test_chap_values_no_initiator_can_send_are_refused_for_tgt(chap, field):
    with pytest.raises(ScenarioError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_scenario(_chap_scenario("tgt", **chap), "hostile.yaml")


def test_lio_still_sets_chap_on_its_acl_and_both_initiators_present_it():
    for stack in ("lio", "tgt"):
        lines = _rehearsed(_chap_scenario(stack))
        assert any("node.session.auth.password -v twelve-chars" in x for x in lines["initiator"])
    lio = _rehearsed(_chap_scenario("lio"))["target"]
    assert any(x.endswith("/auth/password") and "twelve-chars" in x for x in lio)
    assert any("attrib/authentication" in x and x.startswith("echo 1") for x in lio)


# --- process identity forms --------------------------------------------------------------------

RUN = "/run/user/0/sanlab-labs"
ARGV = [
    "qemu-system-x86_64",
    "-qmp", f"unix:{RUN}/pl-b/solo.qmp.sock,server=on,wait=off",
    "-chardev",
    f"socket,id=con,path={RUN}/pl-b/solo.console.sock,server=on,logfile={RUN}/pl-b/solo.console.log",
    "-netdev", f"dgram,id=n0,local.type=unix,local.path={RUN}/pl-b/a.sock,remote.path={RUN}/pl-b/b.sock",
]  # fmt: skip
NOT_NAMED = {
    "prefix-folder": f"{RUN}/pl",
    "prefix-socket": f"{RUN}/pl/solo.qmp.sock",
    "folder-of-the-socket": f"{RUN}/pl-b",
    "trailing-slash": f"{RUN}/pl-b/",
    "socket-without-unix": f"unix:{RUN}/pl-b/solo.qmp.sock",
    "part-of-a-value": f"{RUN}/pl-b/solo.console",
    "relative": "pl-b/solo.qmp.sock",
    "the-program": "qemu-system-x86_64",
    "a-key": "local.path",
    "dot-segment": f"{RUN}/pl/../pl-b/a.sock",
}


@pytest.mark.parametrize("path", NOT_NAMED.values(), ids=NOT_NAMED.keys())
def test_a_path_is_named_only_whole(path):
    assert not names_path(ARGV, path)


@pytest.mark.parametrize(
    "path",
    [
        f"{RUN}/pl-b/solo.qmp.sock",
        f"{RUN}/pl-b/solo.console.sock",
        f"{RUN}/pl-b/solo.console.log",
        f"{RUN}/pl-b/b.sock",
    ],
)
def test_a_path_named_whole_is_found(path):
    assert names_path(ARGV, path) and path in [v for w in ARGV for v in option_values(w)]

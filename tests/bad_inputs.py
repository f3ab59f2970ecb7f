"""The hostile-input corpus: broken scenario files, model invocations and captures.

Each case is what a user (or an attacker) could hand sanlab, with a piece of
the one-line error it must give.  ``test_bad_inputs.py`` runs them all.
Scenario cases are built on a valid two-host scenario with one thing broken,
so each error is about that thing alone.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

BASE: dict[str, Any] = {
    "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
    "links": [{"name": "fabric", "endpoints": ["initiator", "target"], "fabric": "roce"}],
    "targets": [{"name": "t1", "host": "target", "stack": "lio", "transport": "iscsi", "size": "32m"}],
    "workloads": [{"rw": "randwrite", "bs": "4k", "iodepth": 4, "runtime": "3s", "verify": "crc32c"}],
    "projections": [{"profile": "modern-100g", "transport": "iscsi", "fabric": "eth", "link_gbps": 100}],
}


@dataclass(frozen=True)
class Case:
    name: str
    content: bytes
    expect: str  # a piece of the error line


def _with(path: str, value: Any) -> bytes:
    """BASE with the value at ``path`` ('targets.0.size') replaced (or added)."""
    data = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node: Any = data
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(last) if last.isdigit() else last] = value
    return yaml.safe_dump(data, allow_unicode=True).encode()


# (field path, bad value, piece of the error)
FIELD_CASES: list[tuple[str, Any, str]] = [
    ("hosts.0.memory", 512, "out of range for a host memory"),
    ("hosts.0.memory", "1024t", "out of range for a host memory"),
    ("hosts.0.memory", "100m", "out of range for a host memory"),
    ("hosts.0.memory", "1000000", "out of range for a host memory"),
    ("hosts.0.memory", "768k", "out of range for a host memory"),
    ("hosts.0.memory", -1, "is not a size"),
    ("hosts.0.memory", "lots", "is not a size"),
    ("hosts.0.cpus", 0, "greater than or equal to 1"),
    ("hosts.0.cpus", 1000, "less than or equal to 16"),
    ("hosts.0.cpus", "two", "valid integer"),
    ("hosts.0.name", "../etc", "is not allowed here"),
    ("hosts.0.name", "a b", "is not allowed here"),
    ("hosts.0.name", "UPPER", "is not allowed here"),
    ("hosts.0.name", "x" * 40, "is not allowed here"),
    ("hosts.0.name", "$(reboot)", "is not allowed here"),
    ("hosts.0.name", "", "is not allowed here"),
    ("hosts.0.role", "switch", "is not allowed"),
    ("hosts.0.colour", "red", "unknown field"),
    ("hosts", "two hosts", "valid list"),
    ("hosts.1.name", "initiator", "declared twice"),
    ("links.0.rate", "999999999gbit", "out of range for a link rate"),
    ("links.0.rate", "0.001bit", "out of range for a link rate"),
    ("links.0.rate", "10gb", "is not a rate"),
    ("links.0.rate", "fast", "is not a rate"),
    ("links.0.rate", "１0gbit", "is not a rate"),
    ("links.0.rate", 10, "is not a rate"),
    ("links.0.delay", "100000m", "out of range for a link delay"),
    ("links.0.delay", -1, "is not a duration"),
    ("links.0.delay", ".inf", "is not a duration"),
    ("links.0.delay", float("inf"), "is not a duration"),
    ("links.0.delay", float("nan"), "is not a duration"),
    ("links.0.delay", "2 weeks", "is not a duration"),
    ("links.0.loss", "120%", "between 0% and 100%"),
    ("links.0.loss", -3, "between 0% and 100%"),
    ("links.0.loss", float("nan"), "between 0% and 100%"),
    ("links.0.loss", "lots", "is not a percentage"),
    ("links.0.mtu", 100, "greater than or equal to 576"),
    ("links.0.mtu", 65536, "less than or equal to 9000"),
    ("links.0.endpoints", ["initiator"], "at least 2"),
    ("links.0.endpoints", ["initiator", "nobody"], "is not a host"),
    ("links.0.endpoints", ["target", "target"], "two different hosts"),
    ("links.0.fabric", "fibre", "is not allowed"),
    ("links.0.rdma_driver", "mlx5", "is not allowed"),
    ("links.0.rdma_driver", "siw", "'siw' is iWARP"),
    ("targets.0.size", 3, "out of range for a target size"),
    ("targets.0.size", "99999999999999999999t", "out of range for a target size"),
    ("targets.0.size", "999999999999999999999t", "is not a size"),
    ("targets.0.size", "2t", "out of range for a target size"),
    ("targets.0.size", "1536k", "not a multiple of 1m"),
    ("targets.0.size", "64g", "held in RAM, more than half"),
    ("targets.0.size", "800m", "more than half of 'target'"),
    ("targets.0.size", "４k", "is not a size"),
    ("targets.0.size", True, "is not a size"),
    ("targets.0.size", [1], "is not a size"),
    ("targets.0.luns", 0, "greater than or equal to 1"),
    ("targets.0.luns", 99, "less than or equal to 16"),
    ("targets.0.stack", "scst", "projections only"),
    ("targets.0.stack", "windows", "is not allowed"),
    ("targets.0.transport", "fc", "is not allowed"),
    ("targets.0.transport", "nvme-tcp", "not served by lio"),
    ("targets.0.host", "initiator", "has role 'initiator'"),
    ("targets.0.host", "ghost", "is not a host"),
    ("targets.0.link", "nowhere", "is not a link"),
    ("targets.0.backstore", "tape", "is not allowed"),
    ("targets.0.backstore", None, "'null' discards writes"),
    ("targets.0.chap", {"username": "u; reboot", "password": "abcdefghijklm"}, "is not allowed here"),
    ("targets.0.chap", {"username": "u", "password": "ab'c d$(id)ef"}, "is not allowed here"),
    ("targets.0.chap", {"username": "u", "password": "short"}, "at least 12"),
    ("targets.0.chap", {"username": "u", "password": "x" * 40}, "at most 16"),
    ("targets.0.chap", {"username": "", "password": "abcdefghijklm"}, "at least 1"),
    ("targets.0.chap", {"username": "u\nv", "password": "abcdefghijklm"}, "is not allowed here"),
    ("targets.0.chap", {"username": "u#x", "password": "abcdefghijklm"}, "is not allowed here"),
    ("targets.0.chap", {"username": "u;x", "password": "abcdefghijklm"}, "without spaces, ';'"),
    ("targets.0.chap", {"username": "u", "password": "abcdefghij;'$(x)"}, None),  # valid: quoted
    ("targets.0.chap", {"username": "u", "password": "abcdefghijk=m"}, "is not allowed here"),
    ("targets.0.chap", {"username": "u"}, "is required"),
    ("targets.0.chap", "secret", "valid dictionary"),
    ("targets.0.header_digest", "maybe", "valid boolean"),
    ("targets.0.name", "t/../../x", "is not allowed here"),
    ("workloads.0.bs", 3, "out of range for a block size"),
    ("workloads.0.bs", 1000, "not a multiple of 512"),
    ("workloads.0.bs", "1t", "out of range for a block size"),
    ("workloads.0.bs", "1g", "out of range for a block size"),
    ("workloads.0.bs", "64m", "out of range for a block size"),
    ("workloads.0.bs", "16m", None),  # valid: half the 32m LUN
    ("workloads.0.bs", "４k", "is not a size"),
    ("workloads.0.bs", "4k4", "is not a size"),
    ("workloads.0.bs", [], "at least 1"),
    ("workloads.0.bs", ["4k"] * 40, "at most 32"),
    ("workloads.0.bs", 0, "is not a size"),
    ("workloads.0.bs", -4096, "is not a size"),
    ("workloads.0.bs", 4.5, "is not a size"),
    ("workloads.0.iodepth", [], "at least 1"),
    ("workloads.0.iodepth", 0, "greater than or equal to 1"),
    ("workloads.0.iodepth", 100000, "less than or equal to 1024"),
    ("workloads.0.numjobs", [], "at least 1"),
    ("workloads.0.numjobs", 1000, "less than or equal to 64"),
    ("workloads.0.numjobs", 64, None),  # valid: 64 x 4 in flight
    ("workloads.0.rw", [], "at least 1"),
    ("workloads.0.rw", "trim", "is not allowed"),
    ("workloads.0.runtime", 0, "out of range for a runtime"),
    ("workloads.0.runtime", ".inf", "is not a duration"),
    ("workloads.0.runtime", float("inf"), "is not a duration"),
    ("workloads.0.runtime", "2h", "is not a duration"),
    ("workloads.0.runtime", "5000s", "out of range for a runtime"),
    ("workloads.0.runtime", "100us", "out of range for a runtime"),
    ("workloads.0.verify", "md5", "is not allowed"),
    ("workloads.0.verify_size", "64m", "do not fit in targets[0]'s size"),
    ("workloads.0.verify_size", "1m", None),  # valid: a control case
    ("workloads.0.transports", [], "at least 1"),
    ("workloads.0.transports", ["srp"], "used by no target"),
    ("workloads.0.name", "a/b", "is not allowed here"),
    ("projections.0.profile", "../../../etc/passwd", "is not allowed here"),
    ("projections.0.profile", "/etc/passwd", "is not allowed here"),
    ("projections.0.profile", "nosuch", "is not a profile"),
    ("projections.0.profile", "/nonexistent/p.yaml", "cannot read"),
    ("projections.0.fabric", "roce", "runs over TCP"),
    ("projections.0.link_gbps", 0, "greater than 0"),
    ("projections.0.link_gbps", 1e9, "less than or equal to 800"),
    ("projections.0.mtu", 10, "greater than or equal to 576"),
    ("projections.0.sessions", 0, "greater than or equal to 1"),
    ("projections.0.target_stack", "tgt", None),  # valid: tgt serves iSCSI
    ("projections.0.target_stack", "nvmet", "does not serve 'iscsi'"),
    ("projections.0.label", "a\nb", "is not allowed here"),
    ("projections.0.backend", "floppy", "is not allowed"),
    ("name", "../x", "is not allowed here"),
    ("capture", "sometimes", "valid boolean"),
    ("description", "x" * 5000, "at most 2000"),
    ("surprise", 1, "unknown field"),
]


def _bomb() -> bytes:
    lines = ["a: &a [" + ", ".join(["x"] * 9) + "]"]
    for i in range(8):
        this, prev = chr(ord("b") + i), chr(ord("a") + i)
        lines.append(f"{this}: &{this} [" + ", ".join([f"*{prev}"] * 9) + "]")
    lines.append("hosts: *i")
    return ("\n".join(lines) + "\n").encode()


def _wide_bomb() -> bytes:
    """Few aliases, each a very long list: memory, not depth."""
    return b"a: &a [" + b", ".join([b"1"] * 3000) + b"]\nb: [" + b", ".join([b"*a"] * 3000) + b"]\n"


WHOLE_FILE_CASES: list[Case] = [
    Case("empty-mapping", b"{}\n", "declares neither hosts nor projections"),
    Case("empty-file", b"", "a scenario must be a YAML mapping"),
    Case("only-comment", b"# nothing\n", "a scenario must be a YAML mapping"),
    Case("a-list", b"- hosts\n", "a scenario must be a YAML mapping"),
    Case("a-string", b"hello\n", "a scenario must be a YAML mapping"),
    Case("a-number", b"42\n", "a scenario must be a YAML mapping"),
    Case("random-binary", bytes(range(256)) * 4, "not UTF-8 text"),
    Case("elf", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 56, "is not text"),
    Case("latin-1", "hosts: [{name: caf\u00e9, role: target}]\n".encode("latin-1"), "not UTF-8 text"),
    Case("utf-16-bom", "hosts: []\n".encode("utf-16"), "not UTF-8 text"),
    Case("utf-8-bom", "\ufeffsurprise: 1\n".encode(), "unknown field"),
    Case("nul-byte", b"hosts: []\x00\n", "is not text"),
    Case("deep-flow", b"hosts: " + b"[" * 600 + b"]" * 600 + b"\n", "nests deeper than"),
    Case("deep-block", ("a:\n" + "".join(" " * i + "- \n" for i in range(1, 60))).encode(), "nests deeper"),
    Case("alias-bomb", _bomb(), "expands to more than"),
    Case("wide-alias-bomb", _wide_bomb(), "expands to more than"),
    Case("duplicate-top-key", b"hosts: []\nhosts: [{name: a, role: target}]\n", "key 'hosts' appears twice"),
    Case(
        "duplicate-nested-key",
        b"hosts: [{name: a, role: target, role: initiator}]\n",
        "key 'role' appears twice",
    ),
    Case("bad-yaml-tab", b"hosts:\n\t- name: a\n", "not valid YAML"),
    Case("bad-yaml-bracket", b"hosts: [\n", "not valid YAML"),
    Case("bad-yaml-anchor", b"hosts: *nowhere\n", "not valid YAML"),
    Case("python-tag", b"hosts: !!python/object/apply:os.system ['id']\n", "not valid YAML"),
    Case("two-documents", b"hosts: []\n---\nhosts: []\n", "not valid YAML"),
    Case("huge", b"# " + b"x" * (1 << 20) + b"\n", "a scenario or profile is at most"),
    Case(
        "many-hosts",
        ("hosts:\n" + "".join(f"  - {{name: h{i}, role: target}}\n" for i in range(40))).encode(),
        "at most 16",
    ),
    Case(
        "block-larger-than-lun",
        _with("targets.0.size", "4m").replace(b"bs: 4k", b"bs: [4k, 8m]"),
        "larger than targets[0]'s size",
    ),
    Case(
        "too-many-in-flight",
        _with("workloads.0.iodepth", 1024).replace(b"verify: crc32c", b"verify: crc32c\n  numjobs: 8"),
        "I/Os in flight",
    ),
    Case("fullwidth-digits", b"hosts: [{name: a, role: target, cpus: \xef\xbc\x92}]\n", "valid integer"),
]


def scenario_cases() -> list[Case]:
    cases = [
        Case(f"{path}={str(value)[:20]}", _with(path, value), expect)
        for path, value, expect in FIELD_CASES
        if expect is not None
    ]
    return cases + WHOLE_FILE_CASES


def valid_controls() -> list[Case]:
    """Changes that must still validate: the corpus is not passing by refusing everything."""
    return [Case(f"{p}={v}", _with(p, v), "") for p, v, expect in FIELD_CASES if expect is None]


POINT = ["--transport", "nvme-tcp", "--fabric", "eth", "--link-gbps", "100", "--rw", "randread"]
POINT_QD = ["--iodepth", "1", "--numjobs", "1"]


def point(transport: str = "nvme-tcp", fabric: str = "eth", gbps: str = "100", *extra: str) -> list[str]:
    """A whole `sanlab model` point, with one thing changed."""
    return [
        "--transport",
        transport,
        "--fabric",
        fabric,
        "--link-gbps",
        gbps,
        "--rw",
        "read",
        "--bs",
        "4k",
        *extra,
        *POINT_QD,
    ]


MODEL_CASES: list[tuple[list[str], str]] = [
    (["--seed", "-1"], "'--seed'"),
    (["--seed", "99999999999"], "'--seed'"),
    (["--seed", "x"], "'--seed'"),
    (["--report", "/etc/passwd"], "exists and is not a directory"),
    (["--report", "/proc/x"], "cannot write there"),
    (["--profile", "nosuch"], "is not a profile"),
    (["--profile", "../../etc/passwd"], "is not a profile"),
    ([*POINT, "--bs", "1t", *POINT_QD], "--bs: '1t' is out of range"),
    ([*POINT, "--bs", "3", *POINT_QD], "--bs: '3' is out of range"),
    ([*POINT, "--bs", "1000", *POINT_QD], "--bs: '1000' is not a multiple of 512"),
    ([*POINT, "--bs", "４k", *POINT_QD], "--bs: '４k' is not a size"),
    ([*POINT, "--bs", "", *POINT_QD], "is not a size"),
    ([*POINT, "--bs", "4k", "--iodepth", "4096", "--numjobs", "256"], "--iodepth: 4096"),
    ([*POINT, "--bs", "4k", "--iodepth", "1024", "--numjobs", "64"], "I/Os in flight"),
    ([*POINT, "--bs", "4k", "--iodepth", "0", "--numjobs", "1"], "--iodepth: 0"),
    ([*POINT, "--bs", "4k", "--iodepth", "1", "--numjobs", "0"], "--numjobs: 0"),
    ([*POINT, "--bs", "4k", "--iodepth", "x", "--numjobs", "1"], "'--iodepth'"),
    (point("nvme-tcp", "roce"), "runs over TCP"),
    (point("iser", "eth"), "needs an RDMA fabric"),
    (point("srp", "iwarp"), "not iWARP"),
    (point(gbps="0"), "--link-gbps: 0"),
    (point(gbps="nan"), "--link-gbps"),
    (point(gbps="inf"), "--link-gbps"),
    (point("nvme-tcp", "eth", "100", "--mtu", "100"), "--mtu: 100"),
    (["--transport", "nvme-tcp"], "needs --fabric"),
    (["--transport", "fc"], "'--transport'"),
    (["--bs", "4k"], "need --transport"),
    (point("iscsi", "eth", "10", "--target-stack", "nvmet"), "does not serve"),
    (["--nosuchoption"], "No such option"),
]

"""Every file sanlab reads goes through one bounded reader (scenarios/reading.py), and no
product code parses a file without it.

The corpus plants hostile files - JSON and YAML nested 100,000 deep, wrong types at every
level of lab state, image manifests, profiles and their fits, calibration tables, sweep specs
and run results, FIFOs, folders, devices, symlink loops, NUL bytes, NaN, infinity, 1e308 and
negative figures, booleans spelled as strings - and holds each to what tests/test_hostile.py
holds its cases to: exit 1 or 2, no traceback, one short line that names the file or field and
what is wrong, and an answer before the hang guard.  The agent's replies come from a real
unix socket that answers as a broken or hostile guest would.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from test_bad_inputs import deadline, error_lines

from sanlab.emulator.agent import AgentClient, AgentError
from sanlab.main import cli
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.reading import json_depth, parse_json, read_csv, typed
from support import REPO

FIFO, FOLDER, HUGE, LOOP = "<fifo>", "<folder>", "<huge>", "<loop>"
DEEP = 100_000
DEEP_JSON = "[" * DEEP + "]" * DEEP
DEEP_OBJECT = '{"a":' * DEEP + "1" + "}" * DEEP
DEEP_YAML = "a: " + "[" * DEEP + "]" * DEEP + "\n"
PUBLISHED = REPO / "models" / "data" / "published"


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    expect: str  # a piece of the one error line
    files: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def _plant(folder: Path, files: dict[str, Any]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == FIFO:
            os.mkfifo(path)
        elif content == FOLDER:
            path.mkdir()
        elif content == HUGE:
            with open(path, "wb") as handle:
                handle.truncate(100 << 20)
        elif content == LOOP:
            path.symlink_to(path.name)
        elif isinstance(content, str) and content.startswith("<symlink:"):
            path.symlink_to(content.removeprefix("<symlink:").removesuffix(">"))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content.replace("{d}", str(folder)))


# --- lab state (emulator/lab_state.py read_state) ------------------------------------------

LAB_EXEC = ["lab", "exec", "lab1", "h", "--", "true"]
STATE = "run/sanlab-labs/lab1/state.json"


def _state(**changes: Any) -> str:
    state: dict[str, Any] = {"name": "lab1", "hosts": {"h": {"pid": 1, "agent": "{d}/h.agent.sock"}}}
    for key, value in changes.items():
        if key.startswith("host_"):
            state["hosts"]["h"][key.removeprefix("host_")] = value
        else:
            state[key] = value
    return json.dumps(state)


LAB_STATES: list[tuple[str, Any, str]] = [
    ("deep-list", DEEP_JSON, "levels deep"),
    ("deep-object", DEEP_OBJECT, "levels deep"),
    ("list", "[1, 2]", "valid dictionary"),
    ("string", '"lab"', "valid dictionary"),
    ("nan", '{"hosts": NaN}', "not a number here"),
    ("nul", b'{"hosts": {}}\x00', "NUL byte"),
    ("not-utf8", b'{"name": "\xff"}', "UTF-8"),
    ("hosts-list", _state(hosts=[1]), "hosts"),
    ("hosts-empty", _state(hosts={}), "hosts"),
    ("host-list", _state(hosts={"h": [1]}), "hosts.h"),
    ("pid-text", _state(host_pid="abc"), "hosts.h.pid"),
    ("pid-bool", _state(host_pid=True), "hosts.h.pid"),
    ("pid-float", _state(host_pid=1.5), "hosts.h.pid"),
    ("pid-negative", _state(host_pid=-1), "hosts.h.pid"),
    ("pid-huge", _state(host_pid=10**30), "hosts.h.pid"),
    ("pid-missing", json.dumps({"hosts": {"h": {"agent": "x"}}}), "hosts.h.pid"),
    ("agent-int", _state(host_agent=5), "hosts.h.agent"),
    ("agent-nul", _state(host_agent="a\u0000b"), "hosts.h.agent"),
    ("started-text", _state(host_started="yesterday"), "hosts.h.started"),
    ("started-negative", _state(host_started=-5), "hosts.h.started"),
    ("links-string", _state(host_links="abc"), "hosts.h.links"),
    ("addresses-list", _state(addresses=["10.0.0.1"]), "addresses"),
    ("address-shell", _state(addresses={"h/l": "$(id)"}), "addresses"),
    ("address-key", _state(addresses={"nolink": "10.0.0.1"}), "addresses"),
    ("address-octet", _state(addresses={"h/l": "999.1.1.1"}), "addresses"),
    ("address-int", _state(addresses={"h/l": 10}), "addresses"),
    ("captures-list", _state(captures=["a"]), "captures"),
    ("capture-int", _state(captures={"l": 5}), "captures"),
    ("started-inf", '{"started": 1e400, "hosts": {}}', "finite"),
    ("fifo", FIFO, "FIFO"),
    ("folder", FOLDER, "a directory"),
    ("huge", HUGE, "at most"),
    ("loop", LOOP, "symbolic links"),
    ("device", "<symlink:/dev/zero>", "a device"),
]


def _lab_cases() -> list[Case]:
    return [
        Case(f"lab-state-{name}", LAB_EXEC, expect, {STATE: content}, {"XDG_RUNTIME_DIR": "{d}/run"})
        for name, content, expect in LAB_STATES
    ]


# --- image manifests (emulator/images.py) --------------------------------------------------

MANIFEST = "cache/images/abcd1234/manifest.json"
IMAGE_MANIFESTS: list[tuple[str, Any, str]] = [
    ("deep", "[" * 5000 + "]" * 5000, "levels deep"),
    ("huge-deep", DEEP_JSON, "at most"),
    ("list", "[]", "valid dictionary"),
    ("initrd-text", '{"key": "abcd1234", "initrd_bytes": "abc"}', "initrd_bytes"),
    ("initrd-negative", '{"key": "abcd1234", "initrd_bytes": -1}', "initrd_bytes"),
    ("initrd-bool", '{"key": "abcd1234", "initrd_bytes": true}', "initrd_bytes"),
    ("seconds-nan", '{"key": "abcd1234", "build_seconds": NaN}', "not a number here"),
    ("key-int", '{"key": 5}', "key: 5"),
    ("nul", b'{"key": "abcd1234"}\x00', "NUL byte"),
]


@pytest.mark.parametrize(
    ("content", "expect"), [c[1:] for c in IMAGE_MANIFESTS], ids=[c[0] for c in IMAGE_MANIFESTS]
)
@pytest.mark.parametrize("listing", [["images", "list"], ["images", "list", "--json"]], ids=["text", "json"])
def test_a_bad_image_manifest_is_listed_as_unreadable(
    tmp_path, content: Any, expect: str, listing: list[str]
):
    """``images list`` names the image and what is wrong with its manifest, and lists the rest."""
    _plant(tmp_path, {MANIFEST: content})
    with deadline(60):
        result = CliRunner().invoke(cli, listing, env={"SANLAB_CACHE": str(tmp_path / "cache")})
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    line = next(line for line in result.output.splitlines() if expect in line)
    assert "abcd1234" in line and "image manifest" in line


# --- profiles and their fits (models/core/profile.py) --------------------------------------------

BASE_PROFILE = yaml.safe_load((REPO / "models" / "profiles" / "modern-100g.yaml").read_text())


def _profile(**changes: Any) -> str:
    data = json.loads(json.dumps(BASE_PROFILE))
    for key, value in changes.items():
        node = data
        *parents, last = key.split("__")
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value
    return yaml.safe_dump(data)


PROFILES: list[tuple[str, Any, str]] = [
    ("nics-text", _profile(nics="abc"), "nics"),
    ("nics-ints", _profile(nics=[1, 2]), "nics[0]"),
    ("nics-empty", _profile(nics=[]), "nics"),
    ("backends-list", _profile(backends=[1, 2]), "backends"),
    ("backend-list", _profile(backends__ramdisk=[1]), "backends.ramdisk"),
    ("link-empty", _profile(nics__0__link_gbps=[]), "link_gbps"),
    ("link-nan", _profile(nics__0__link_gbps=[float("nan")]), "link_gbps"),
    ("link-huge", _profile(nics__0__link_gbps=[1e308]), "link_gbps"),
    ("link-negative", _profile(nics__0__link_gbps=[-10]), "link_gbps"),
    ("link-text", _profile(nics__0__link_gbps="fast"), "link_gbps"),
    ("ghz-1e308", _profile(initiator__ghz=1e308), "initiator.ghz"),
    ("ghz-inf", _profile(initiator__ghz=float("inf")), "initiator.ghz"),
    ("ghz-negative", _profile(target__ghz=-2.0), "target.ghz"),
    ("ghz-text", _profile(target__ghz="fast"), "target.ghz"),
    ("cores-2e9", _profile(initiator__cores=2e9), "initiator.cores"),
    ("cores-zero", _profile(initiator__cores=0), "initiator.cores"),
    ("cores-half", _profile(initiator__cores=1.5), "initiator.cores"),
    (
        "cost-1e308",
        _profile(costs={"lio/iscsi": {"target_kcycles_per_io": 1e308, "initiator_kcycles_per_io": 1}}),
        "costs",
    ),
    (
        "cost-negative",
        _profile(costs={"lio/iscsi": {"target_kcycles_per_io": -1, "initiator_kcycles_per_io": 1}}),
        "costs",
    ),
    ("mtu-tiny", _profile(nics__0__mtu=1), "mtu"),
    ("one-way-1e308", _profile(nics__0__one_way_us=1e308), "one_way_us"),
    ("backend-latency-1e308", _profile(backends__ramdisk__read_latency_us=1e308), "read_latency_us"),
    ("backend-rate-zero", _profile(backends__ramdisk__read_gbytes_per_s=0), "read_gbytes_per_s"),
    ("sessions-zero", _profile(sessions={"iscsi": 0}), "sessions"),
    ("max-transfer-1", _profile(max_transfer={"iscsi": 1}), "max_transfer"),
    ("initiator-list", _profile(initiator=[1]), "initiator"),
    ("toe-text", _profile(nics__0__toe="yes"), "toe"),
    ("protocol-1e308", _profile(protocol={"nvme_tcp_in_capsule": 1e308}), "nvme_tcp_in_capsule"),
    ("protocol-text", _profile(protocol={"nvme_tcp_in_capsule": "abc"}), "nvme_tcp_in_capsule"),
    ("protocol-unknown", _profile(protocol={"colour": 1}), "colour"),
    ("protocol-bool-text", _profile(protocol={"initial_r2t": "no"}), "initial_r2t"),
    ("calibration-data-list", _profile(calibration={"data": [1]}), "calibration"),
    ("calibration-data-path", _profile(calibration={"data": "../../etc/passwd"}), "calibration"),
    ("default-backend", _profile(default_backend="nosuch"), "default_backend"),
    ("cable-nan", _profile(cable_m=float("nan")), "cable_m"),
    ("root-list", "- 1\n- 2\n", "valid dictionary"),
    ("deep", DEEP_YAML, "nest"),
    ("nul", b"name: a\x00\n", "NUL byte"),
    ("loop", LOOP, "symbolic links"),
    ("folder", FOLDER, "a directory"),
]


def _profile_cases() -> list[Case]:
    model = ["model", "--profile", "{d}/p.yaml"]
    cases = [Case(f"profile-{name}", model, expect, {"p.yaml": text}) for name, text, expect in PROFILES]
    fits: list[tuple[str, Any, str]] = [
        ("list", "- 1\n- 2\n", "valid dictionary"),
        ("parameters-list", "parameters: [1, 2]\n", "parameters"),
        ("int-key", "parameters: {1: 2}\n", "parameters"),
        ("list-value", "parameters: {initiator.ghz: [1]}\n", "initiator.ghz"),
        ("text-value", "parameters: {initiator.ghz: fast}\n", "initiator.ghz"),
        ("nan-value", "parameters: {initiator.ghz: .nan}\n", "initiator.ghz"),
        ("unknown-part", "parameters: {nosuch.part.ghz: 2}\n", "nosuch"),
        ("deep", DEEP_YAML, "nest"),
        ("fifo", FIFO, "not a regular file"),
        ("folder", FOLDER, "a directory"),
        ("beyond-physics", "parameters: {initiator.ghz: 1.0e+308}\n", "initiator.ghz"),
    ]
    for name, text, expect in fits:
        files = {"p.yaml": _profile(), "p.fit.yaml": text}
        cases.append(Case(f"profile-fit-{name}", model, expect, files))
    cases.append(Case("profile-empty-name", ["model", "--profile", ""], "is not a profile"))
    cases.append(Case("profile-blank-name", ["model", "--profile", "  "], "is not a profile"))
    cases.append(
        Case(
            "calibrate-base-empty",
            ["calibrate", "--runs", "{d}", "--name", "x", "--base", ""],
            "is not a profile",
        )
    )
    return cases


# --- calibration tables (models/core/published.py) -----------------------------------------------

ZETA_HEADER = "transport,fabric,link_gbps,rw,bs,iodepth,numjobs,iops,bw_mibps\n"
ZETA_ROW = "iscsi,eth,10,randread,4k,32,1,75482,294.9\n"


def _zeta(row: str, header: str = ZETA_HEADER) -> str:
    return header + ZETA_ROW + row + "\n"


TABLES: list[tuple[str, Any, str]] = [
    ("iops-text", _zeta("iscsi,eth,10,randread,4k,32,1,abc,294.9"), "column 'iops' is 'abc'"),
    ("iops-nan", _zeta("iscsi,eth,10,randread,4k,32,1,nan,294.9"), "column 'iops'"),
    ("iops-inf", _zeta("iscsi,eth,10,randread,4k,32,1,inf,294.9"), "column 'iops'"),
    ("iops-negative", _zeta("iscsi,eth,10,randread,4k,32,1,-5,294.9"), "column 'iops'"),
    ("iops-1e308", _zeta("iscsi,eth,10,randread,4k,32,1,1e308,294.9"), "column 'iops'"),
    ("iodepth-half", _zeta("iscsi,eth,10,randread,4k,1.5,1,5,1"), "column 'iodepth'"),
    ("iodepth-zero", _zeta("iscsi,eth,10,randread,4k,0,1,5,1"), "column 'iodepth'"),
    ("link-1e308", _zeta("iscsi,eth,1e308,randread,4k,32,1,5,1"), "column 'link_gbps'"),
    ("bs-text", _zeta("iscsi,eth,10,randread,lots,32,1,5,1"), "column 'bs'"),
    ("transport-unknown", _zeta("fc,eth,10,randread,4k,32,1,5,1"), "column 'transport'"),
    ("rw-unknown", _zeta("iscsi,eth,10,trim,4k,32,1,5,1"), "column 'rw'"),
    ("ragged", _zeta("iscsi,eth,10"), "row 3"),
    ("missing-column", "transport,fabric\niscsi,eth\n", "no column"),
    ("nul", _zeta("iscsi,eth,10,randread,4k,32,1,5\x00,1").encode(), "NUL byte"),
    ("not-utf8", _zeta("iscsi,eth,10,randread,4k,32,1,5,1").encode() + b"\xff\n", "UTF-8"),
    ("huge", HUGE, "at most"),
]


def _table_cases() -> list[Case]:
    run = ["calibrate", "--data", "{d}/data"]
    copies = {f"data/{p.name}": p.read_text() for p in PUBLISHED.glob("*.csv")}
    cases = [
        Case(f"calibrate-table-{name}", run, expect, copies | {"data/zeta-2016.csv": content})
        for name, content, expect in TABLES
    ]
    cases.append(Case("calibrate-table-fifo", run, "FIFO", copies | {"data/starwind-2024.csv": FIFO}))
    cases.append(
        Case("calibrate-table-folder", run, "a directory", copies | {"data/starwind-2024.csv": FOLDER})
    )
    cases.append(Case("calibrate-table-loop", run, "zeta-2016.csv", copies | {"data/zeta-2016.csv": LOOP}))
    cases.append(Case("calibrate-data-dev-null", ["calibrate", "--data", "/dev/null"], "is not a folder"))
    cases.append(Case("calibrate-data-fifo", run[:2] + ["{d}/f"], "is not a folder", {"f": FIFO}))
    cases.append(Case("calibrate-data-file", run[:2] + ["{d}/f"], "is not a folder", {"f": "x"}))
    cases.append(Case("calibrate-data-empty-folder", run, "holds no zeta-2016.csv", {"data/x": "y"}))
    return cases


# --- results, manifests and sweep specs -------------------------------------------------------


def _document_cases() -> list[Case]:
    runs = ["calibrate", "--runs", "{d}/r", "--name", "mine"]
    sweep = ["sweep", "{d}/s.yaml", "--out", "{d}/out", "--serial"]
    spec = {
        "axes": {"iodepth": [1]},
        "fixed": {"transport": "iser", "rw": "randread", "bs": "4k", "numjobs": 1},
    }
    twice = json.loads(json.dumps(spec))
    twice["axes"] |= {"link-gbps": [10], "link_gbps": [25]}
    fixed_twice = json.loads(json.dumps(spec))
    fixed_twice["fixed"] |= {"link-gbps": 10, "link_gbps": 25}
    manifest = "out/.sanlab-manifest.json"
    return [
        Case("runs-results-deep", runs, "levels deep", {"r/results.json": DEEP_JSON}),
        Case("runs-results-deep-object", runs, "levels deep", {"r/results.json": DEEP_OBJECT}),
        Case("runs-results-nan", runs, "not a number here", {"r/results.json": '{"results": [NaN]}'}),
        Case("runs-results-overflow", runs, "finite", {"r/results.json": '{"results": [1e999]}'}),
        Case("runs-results-nul", runs, "NUL byte", {"r/results.json": b'{"results": []}\x00'}),
        Case("runs-results-fifo", runs, "FIFO", {"r/results.json": FIFO}),
        Case("runs-results-loop", runs, "symbolic links", {"r/results.json": LOOP}),
        Case(
            "sweep-manifest-deep",
            sweep,
            "not valid JSON",
            {"s.yaml": yaml.safe_dump(spec), manifest: DEEP_JSON},
        ),
        Case(
            "sweep-manifest-list",
            sweep,
            "not one sanlab wrote",
            {"s.yaml": yaml.safe_dump(spec), manifest: "[]"},
        ),
        Case("sweep-spec-deep", sweep, "nest", {"s.yaml": DEEP_YAML}),
        Case(
            "sweep-axes-two-spellings",
            sweep,
            "'link-gbps' and 'link_gbps'",
            {"s.yaml": yaml.safe_dump(twice)},
        ),
        Case(
            "sweep-fixed-two-spellings",
            sweep,
            "'link-gbps' and 'link_gbps'",
            {"s.yaml": yaml.safe_dump(fixed_twice)},
        ),
        Case("scenario-deep", ["validate", "{d}/s.yaml"], "nest", {"s.yaml": DEEP_YAML}),
        Case(
            "inventory-deep",
            ["run", "scenarios/smoke.yaml", "--inventory", "{d}/i.yaml", "--dry-run"],
            "nest",
            {"i.yaml": DEEP_YAML},
        ),
        Case("scenario-loop", ["validate", "{d}/s.yaml"], "symbolic links", {"s.yaml": LOOP}),
        Case("scenario-device", ["validate", "/dev/zero"], "not a regular file"),
    ]


# --- environment and options -------------------------------------------------------------------

RESET = """
hosts: [{name: i, role: initiator}, {name: t, role: target}]
links: [{endpoints: [i, t], fabric: eth}]
targets: [{name: x, host: t, stack: nvmet, transport: nvme-tcp, size: 32m}]
workloads: [{rw: randwrite, bs: 4k}]
faults: [{at: 2s, target: x, action: reset, for: 30s}]
"""


def _machines() -> str:
    from hostile import MACHINES

    data = json.loads(json.dumps(MACHINES))
    data["hosts"] = [h | {"ssh": "root@192.0.2.1"} for h in data["hosts"]]
    return yaml.safe_dump(data)


def _environment_cases() -> list[Case]:
    bogus = {"SANLAB_GUEST": "bogus"}
    return [
        Case(
            "guest-bogus-validate", ["validate", "scenarios/pair-rxe.yaml"], "debian-12, debian-13", env=bogus
        ),
        Case(
            "guest-bogus-dry-run",
            ["run", "scenarios/pair-rxe.yaml", "--dry-run"],
            "debian-12, debian-13",
            env=bogus,
        ),
        Case(
            "guest-bogus-lab-up", ["lab", "up", "scenarios/pair-rxe.yaml"], "debian-12, debian-13", env=bogus
        ),
        Case("reset-for", ["validate", "{d}/r.yaml"], "faults[0].for", {"r.yaml": RESET}),
        Case("reset-for-dry-run", ["run", "{d}/r.yaml", "--dry-run"], "faults[0].for", {"r.yaml": RESET}),
        Case(
            "ssh-missing",
            ["run", "{d}/m.yaml", "--dry-run"],
            "ssh is not installed",
            {"m.yaml": _machines()},
            {"PATH": "{d}/bin"},
        ),
    ]


def corpus() -> list[Case]:
    return _lab_cases() + _profile_cases() + _table_cases() + _document_cases() + _environment_cases()


CASES = corpus()


def test_the_corpus_is_over_80_distinct_cases():
    assert len({c.name for c in CASES}) == len(CASES) >= 80


# Cases that try to start a process (ssh, absent from PATH): not in the fast tier.
STARTS_A_PROCESS = {"ssh-missing"}
PARAMS = [
    pytest.param(c, id=c.name, marks=[pytest.mark.subprocess] if c.name in STARTS_A_PROCESS else [])
    for c in CASES
]


@pytest.mark.parametrize("case", PARAMS)
def test_hostile_reading(tmp_path, monkeypatch, case: Case):
    monkeypatch.chdir(REPO)
    _plant(tmp_path, case.files)
    (tmp_path / "bin").mkdir(exist_ok=True)
    env = {key: value.replace("{d}", str(tmp_path)) for key, value in case.env.items()}
    argv = [arg.replace("{d}", str(tmp_path)) for arg in case.argv]
    started = time.monotonic()
    with deadline(60):
        result = CliRunner().invoke(cli, argv, env=env)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"raised {result.exception!r}"
    )
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    lines = error_lines(result.output)
    assert lines and any(case.expect in line for line in lines), result.output
    assert all(len(line) < 600 for line in lines), result.output
    assert time.monotonic() - started < 30, "bounded: an answer in seconds"


# --- the reader itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "depth"),
    [("[]", 1), ('{"a": [1, {"b": 2}]}', 3), ('"[[[["', 0), ('["\\"[[["]', 1), ("1", 0), (DEEP_JSON, DEEP)],
)
def test_depth_is_counted_outside_strings(text: str, depth: int):
    assert json_depth(text) == depth


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "-Infinity", "[1e400]", "-1e999", DEEP_JSON, "{", "\x00"]
)
def test_parse_json_refuses_in_one_line(text: str):
    started = time.monotonic()
    with pytest.raises(SanlabError) as caught:
        parse_json(text, "doc")
    assert str(caught.value).startswith("doc: ") and "\n" not in str(caught.value)
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("schema", "value"),
    [(bool, "yes"), (bool, 1), (int, "5"), (int, True), (int, 1.5), (float, "1.0"), (dict[str, int], [1])],
)
def test_typed_takes_json_types_as_they_are(schema: Any, value: Any):
    with pytest.raises(SanlabError, match="^src: "):
        typed(schema, value, "src")


def test_read_csv_names_file_and_row(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n3\n")
    with pytest.raises(SanlabError, match=r"t\.csv: row 3"):
        read_csv(path, "table")


# --- agent replies from a real socket (emulator/agent.py) ---------------------------------


def _agent(path: Path, reply: Any, end: bytes = b"\n") -> threading.Thread:
    """A unix socket that answers every request with ``reply`` (the request's id filled in),
    ended by ``end`` (nothing: a line that never ends)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn, server:
            buffer = b""
            while b"\n" not in buffer:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    return
                buffer += chunk
            ident = json.loads(buffer.split(b"\n", 1)[0])["id"]
            text = reply(ident) if callable(reply) else json.dumps(reply | {"id": ident})
            with contextlib.suppress(OSError):  # a client that cut us off closed its end
                conn.sendall(text.encode() + end)
                time.sleep(0.5)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


AGENT_REPLIES: list[tuple[str, str, Any, str]] = [
    ("rc-text", "run", {"rc": "abc"}, "rc"),
    ("rc-256", "run", {"rc": 256}, "rc"),
    ("rc-bool", "run", {"rc": True}, "rc"),
    ("rc-float", "run", {"rc": 1.5}, "rc"),
    ("stdout-int", "run", {"rc": 0, "stdout": 5}, "stdout"),
    ("timed-out-text", "run", {"rc": 0, "timed_out": "yes"}, "timed_out"),
    ("pid-text", "spawn", {"pid": "x"}, "pid"),
    ("pid-zero", "spawn", {"pid": 0}, "pid"),
    ("get-not-base64", "get", {"rc": 0, "data": "***"}, "base64"),
    ("get-rc-text", "get", {"rc": "0", "data": ""}, "rc"),
    ("put-rc-list", "put", {"rc": [0]}, "rc"),
]


@pytest.mark.parametrize(
    ("op", "reply", "expect"), [c[1:] for c in AGENT_REPLIES], ids=[c[0] for c in AGENT_REPLIES]
)
def test_agent_reply_of_the_wrong_type_is_one_line(tmp_path, op: str, reply: dict[str, Any], expect: str):
    path = tmp_path / "a.sock"
    _agent(path, reply)
    client = AgentClient(path, "h")
    calls = {"run": lambda: client.run("true", timeout=1), "spawn": lambda: client.spawn("true"),
             "get": lambda: client.get("/x"), "put": lambda: client.put("/x", b"")}  # fmt: skip
    with deadline(30), pytest.raises(AgentError) as caught:
        calls[op]()
    client.close()
    assert expect in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "reply", ["[1, 2]", DEEP_JSON, '{"id": NaN}', "not json"], ids=["list", "deep", "nan", "text"]
)
def test_agent_reply_that_is_no_answer_is_skipped_not_a_traceback(tmp_path, reply: str):
    path = tmp_path / "a.sock"
    _agent(path, lambda ident: reply)
    client = AgentClient(path, "h")
    with deadline(30), pytest.raises(AgentError, match="no answer|closed"):
        client.run("true", timeout=0.5)
    client.close()


# --- nothing parses a file without the reader --------------------------------------------------

LAYERS = ("cli", "scenarios", "emulator", "targets", "dissectors", "models")
READER = {"scenarios/reading.py", "scenarios/yamlfile.py", "scenarios/files.py"}
# (file, function, call): why it may read without the reader.  Nothing else may.
ALLOWED = {
    ("emulator/processes.py", "process_argv", "read_bytes"): "/proc/PID/cmdline: the kernel's",
    ("emulator/processes.py", "pid_alive", "open"): "/proc/PID/stat: the kernel's",
    ("emulator/processes.py", "process_start", "open"): "/proc/PID/stat: the kernel's",
    (
        "scenarios/labs/checking.py",
        "answers",
        "yaml.load",
    ): "text from yamlfile.read_text, after load_yaml bounded it",
    (
        "scenarios/results/outdir.py",
        "copy_into",
        "read_bytes",
    ): "a file sanlab made elsewhere (a VM's console log)",
    ("scenarios/writing.py", "copy_file", "read_bytes"): "the writer's copy of a file sanlab reads whole",
    ("emulator/accel.py", "probe_kvm", "read_bytes"): "the probe's own console log in its temporary folder",
    ("emulator/fabric.py", "start", "read_bytes"): "the package's own fabric program",
    ("emulator/images.py", "image_key", "read_bytes"): "the package's own recipe files, hashed",
    ("emulator/images.py", "_mmdebstrap", "read_text"): "mmdebstrap's log in the build's own folder",
    ("emulator/lab_state.py", "follow_capture", "open"): "a pcap streamed as QEMU writes it, checked first",
    ("emulator/lab.py", "_ssh_into", "read_text"): "the public key sanlab generated in the lab's folder",
    ("emulator/mininet_fabric.py", "main", "open"): "runs inside the fabric VM, on the spec sanlab put there",
    (
        "emulator/mininet_fabric.py",
        "main",
        "json.load",
    ): "runs inside the fabric VM, on the spec sanlab put there",
    ("emulator/panics.py", "read_tail", "Path.open"): "the tail of a console log, bounded by seek",
    **{
        ("targets/blktests_guest.py", function, kind): "runs inside the initiator VM, without sanlab"
        for function in ("_config", "_relay")
        for kind in ("open", "json.load")
    },
    ("emulator/qemu.py", "diagnosis", "read_text"): "QEMU's own logs in the lab's run folder",
    ("emulator/snapshots.py", "_stale", "read_text"): "a snapshot's PID mark, checked a regular file first",
    ("dissectors/plugins.py", "install", "read_bytes"): "the package's own Lua plugins",
    (
        "dissectors/plugins.py",
        "_same",
        "read_bytes",
    ): "an installed plugin, stat'ed regular and of the same size",
    ("dissectors/rawframes.py", "frames_of", "Path.open"): "a capture the analyser checked regular, streamed",
    (
        "models/sweeps/sweep_run.py",
        "done",
        "open",
    ): "the journal the manifest names, each line through parse_json",
}


def _call_kind(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return "open" if func.id == "open" and not _writes(node, node.args[1:]) else None
    if not isinstance(func, ast.Attribute):
        return None
    base = func.value.id if isinstance(func.value, ast.Name) else None
    if base == "json" and func.attr in ("load", "loads"):
        return f"json.{func.attr}"
    if base == "yaml" and func.attr in (
        "load",
        "safe_load",
        "full_load",
        "unsafe_load",
        "load_all",
        "safe_load_all",
    ):
        return f"yaml.{func.attr}"
    if base == "csv" and func.attr in ("reader", "DictReader"):
        return f"csv.{func.attr}"
    if func.attr in ("read_text", "read_bytes"):
        return func.attr
    if (
        func.attr == "open"
        and base not in ("os", "tarfile", "OutputFolder", "socket")
        and not _writes(node, node.args)
    ):
        return "Path.open"
    return None


def _writes(node: ast.Call, mode_args: list[ast.expr]) -> bool:
    modes = [a.value for a in mode_args[:1] if isinstance(a, ast.Constant)]
    modes += [k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
    return any(isinstance(m, str) and any(c in m for c in "wax+") for m in modes)


def _reads() -> list[tuple[str, str, str, int]]:
    found = []
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            name = str(path.relative_to(REPO))
            if name in READER:
                continue
            found += [(name, *hit) for hit in _calls(ast.parse(path.read_text()), "<module>")]
    return found


def _calls(node: ast.AST, function: str) -> list[tuple[str, str, int]]:
    """(innermost function, call kind, line) of every read call under ``node``."""
    hits = []
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
        kind = isinstance(child, ast.Call) and _call_kind(child)
        if kind:
            hits.append((function, kind, child.lineno))
        hits += _calls(child, inner)
    return hits


def test_no_product_code_parses_a_file_without_the_reader():
    bypasses = [f"{f}:{line} {fn}: {kind}" for f, fn, kind, line in _reads() if (f, fn, kind) not in ALLOWED]
    assert not bypasses, "read through scenarios/reading.py (or justify in ALLOWED): " + "; ".join(bypasses)


def test_the_scan_finds_a_bypass(tmp_path):
    """The scan is no test that cannot fail: a json.loads of a file is seen."""
    code = "import json\ndef f(p):\n    return json.loads(p.read_text())\n"
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)]
    assert sorted(filter(None, map(_call_kind, calls))) == ["json.loads", "read_text"]


def test_the_allowlist_holds_no_stale_entry():
    found = {(f, fn, kind) for f, fn, kind, _ in _reads()}
    assert set(ALLOWED) <= found, set(ALLOWED) - found


def test_an_agent_that_never_ends_its_line_is_cut_off(tmp_path, monkeypatch):
    from sanlab.emulator import agent

    monkeypatch.setattr(agent, "MAX_REPLY_BYTES", 1 << 16)  # the real bound is 512 MiB
    path = tmp_path / "a.sock"
    # Never ended: with a newline after it, a loaded client could take the whole line in one
    # read, find its end, and meet the closed connection instead (a CI run, 2026-11-27).
    _agent(path, lambda ident: "x" * (1 << 18), end=b"")
    client = AgentClient(path, "h")
    with deadline(30), pytest.raises(AgentError, match="without an answer"):
        client.run("true", timeout=5)
    client.close()


def test_the_docs_hook_names_a_broken_lab_scenario_in_one_line(tmp_path):
    """docs/hooks.py runs generate.py's main: a scenario it cannot load is mkdocs's one-line
    PluginError, not a traceback (a copy of the hook beside a generate.py that loads a broken lab)."""
    from mkdocs.exceptions import PluginError

    (tmp_path / "lab.yaml").write_text("hosts: [\n")
    (tmp_path / "hooks.py").write_text((REPO / "docs" / "hooks.py").read_text())
    (tmp_path / "generate.py").write_text(
        "from sanlab.scenarios.loader import load_scenario\n"
        f"def main():\n    load_scenario({str(tmp_path / 'lab.yaml')!r})\n"
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("hooks_copy", tmp_path / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    with pytest.raises(PluginError) as caught:
        hooks.on_pre_build(config={})
    assert "lab.yaml" in str(caught.value) and "not valid YAML" in str(caught.value)
    assert "\n" not in str(caught.value)


KEEPER_STATUSES: list[tuple[str, Any]] = [
    ("devices-shell", {"pid": 5, "state": "ready", "devices": ["/dev/x;reboot"]}),
    ("devices-relative", {"pid": 5, "state": "ready", "devices": ["../../etc/passwd"]}),
    ("devices-text", {"pid": 5, "state": "ready", "devices": "/dev/sda"}),
    ("pid-text", {"pid": "5", "state": "ready"}),
    ("pid-bool", {"pid": True, "state": "ready"}),
    ("state-unknown", {"pid": 5, "state": "maybe"}),
    ("list", [1]),
    ("deep", json.loads("[" * 20 + "]" * 20)),
]


@pytest.mark.parametrize("status", [c[1] for c in KEEPER_STATUSES], ids=[c[0] for c in KEEPER_STATUSES])
def test_a_planted_keeper_status_is_no_status(tmp_path, monkeypatch, status: Any):
    """targets/lab_targets.py's read_status: a status of the wrong types is none at all, so a
    planted device is never fio's file name and a planted PID is never signalled."""
    from sanlab.targets.sessions.lab_targets import read_status, status_path

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = status_path("lab1", "t", "connect")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(status))
    assert read_status("lab1", "t", "connect") is None
    path.write_text(json.dumps({"pid": 5, "started": 9, "state": "ready", "devices": ["/dev/nvme0n1"]}))
    assert read_status("lab1", "t", "connect") == {
        "pid": 5, "started": 9, "state": "ready", "error": "", "devices": ["/dev/nvme0n1"]
    }  # fmt: skip

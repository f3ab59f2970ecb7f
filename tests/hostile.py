"""The hostile corpus beyond scenario files: inventories, runs, labs, sweeps, calibration
records, profiles and analyser options, as a careless or malicious user would hand them over.

Each case names the files it plants in a fresh folder (text, or a FIFO, a
folder, a sparse giant, a symlink), the command line (``{d}`` is that
folder), and a piece of the one-line error it must give.  ``test_hostile.py``
runs every case and holds each to: exit 1 or 2, no traceback, an answer
before a generous hang guard, nothing run on this machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml
from bad_inputs import point

FIFO, FOLDER, HUGE = "<fifo>", "<folder>", "<huge>"  # planted as a FIFO, a folder, a 100 MB sparse file


@dataclass(frozen=True)
class Hostile:
    name: str
    argv: list[str]
    expect: str  # a piece of the error line
    files: dict[str, Any] = field(default_factory=dict)
    runtime: bool = False  # plant XDG_RUNTIME_DIR={d}/run (the labs' folder) for lab verbs


MACHINES = {
    "name": "two servers",
    "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
    "links": [
        {
            "name": "data",
            "endpoints": ["initiator", "target"],
            "fabric": "roce",
            "interfaces": {"initiator": "ens1", "target": "ens1"},
        }
    ],
    "targets": [{"host": "target", "stack": "nvmet", "transport": "nvme-rdma", "size": "1g"}],
    "workloads": [{"rw": "randread", "bs": "4k", "runtime": "3s"}],
}


def _inventory(host_vars: dict[str, Any]) -> str:
    hosts = {"initiator": {"ansible_host": "192.0.2.11"}, "target": {"ansible_host": "192.0.2.12"}}
    hosts["target"] |= host_vars
    return yaml.safe_dump({"all": {"hosts": hosts}})


def _machines_with(**target_fields: Any) -> str:
    data = json.loads(json.dumps(MACHINES))
    data["hosts"][1] |= {"ssh": "root@192.0.2.12"} | target_fields
    data["hosts"][0] |= {"ssh": "root@192.0.2.11"}
    return yaml.safe_dump(data)


LOCAL_COMMANDS = [
    "ProxyCommand=nc %h %p",
    "proxycommand=touch /tmp/sanlab-pwned",
    "LocalCommand=id",
    "PermitLocalCommand=yes",
    "KnownHostsCommand=/bin/true",
    "Match=exec true",
    "Include=/etc/passwd",
    "PKCS11Provider=/tmp/evil.so",
    "SecurityKeyProvider=/tmp/evil.so",
    "RemoteCommand=reboot",
]


def _ssh_cases() -> list[Hostile]:
    cases = []
    for option in LOCAL_COMMANDS:
        key = option.split("=")[0]
        scenario = _machines_with(ssh_options=[option])
        cases.append(
            Hostile(
                f"scenario-ssh-{key}",
                ["run", "{d}/s.yaml", "--dry-run"],
                "~/.ssh/config",
                {"s.yaml": scenario},
            )
        )
        args = f"-o {option}" if " " not in option else f"-o '{option}'"
        plain = yaml.safe_dump(MACHINES)
        for spelling, text in (("spaced", args), ("joined", f"-o{option.replace(' ', '')}")):
            cases.append(
                Hostile(
                    f"inventory-ssh-{key}-{spelling}",
                    ["run", "{d}/s.yaml", "--inventory", "{d}/inv.yaml", "--dry-run"],
                    "~/.ssh/config",
                    {"s.yaml": plain, "inv.yaml": _inventory({"ansible_ssh_common_args": text})},
                )
            )
    return cases


INVENTORY_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("quote", {"ansible_ssh_common_args": "-o 'ProxyJump=x"}, "cannot be split into words"),
    ("port-true", {"ansible_port": True}, "yes/no"),
    ("port-zero", {"ansible_port": 0}, "greater than or equal to 1"),
    ("port-huge", {"ansible_port": 70000}, "less than or equal to 65535"),
    ("port-text", {"ansible_port": "ssh"}, "valid integer"),
    ("host-option", {"ansible_host": "-oProxyCommand=id"}, "[USER@]HOST"),
    ("host-shell", {"ansible_host": "a;reboot"}, "[USER@]HOST"),
    ("host-space", {"ansible_host": "a b"}, "[USER@]HOST"),
    ("user-shell", {"ansible_user": "$(id)"}, "[USER@]HOST"),
    ("args-not-option", {"ansible_ssh_common_args": "-F /tmp/config"}, "ssh_options"),
    ("args-bad-key", {"ansible_ssh_common_args": "-o Pro-xy=1"}, "KEY=VALUE"),
    ("key-newline", {"ansible_ssh_private_key_file": "a\nb"}, "identity"),
]


def _inventory_cases() -> list[Hostile]:
    plain = yaml.safe_dump(MACHINES)
    run = ["run", "{d}/s.yaml", "--inventory", "{d}/inv.yaml", "--dry-run"]
    cases = [
        Hostile(f"inventory-{name}", run, expect, {"s.yaml": plain, "inv.yaml": _inventory(values)})
        for name, values, expect in INVENTORY_VALUES
    ]
    planted = {
        "fifo": (FIFO, "not a regular file"),
        "folder": (FOLDER, "a directory"),
        "huge": (HUGE, "at most"),
        "list": ("- a\n- b\n", "mapping"),
        "bigint": ("all: {vars: {ansible_port: " + "9" * 5000 + "}}\n", "at most 40"),
        "missing-host": (yaml.safe_dump({"all": {"hosts": {"initiator": {}}}}), "has no host 'target'"),
        "not-yaml": ("all: [\n", "not valid YAML"),
    }
    for name, (content, expect) in planted.items():
        cases.append(Hostile(f"inventory-{name}", run, expect, {"s.yaml": plain, "inv.yaml": content}))
    cases.append(Hostile("inventory-absent", run, "cannot read", {"s.yaml": plain}))
    return cases


def _destination_cases() -> list[Hostile]:
    """IPv6 destinations are allowed (they fail later, at preflight, for want of a machine)."""
    cases = []
    for bad in (
        "-oProxyCommand=id",
        "root@-x",
        "root@a b",
        "root@[::1",
        "root@::1]x",
        "r`id`@h",
        "root@h;id",
    ):
        cases.append(
            Hostile(
                f"ssh-destination-{bad}",
                ["validate", "{d}/s.yaml"],
                "ssh",
                {"s.yaml": _machines_with(ssh=bad)},
            )
        )
    for bad in ("{d}/missing-key", "{d}"):
        cases.append(
            Hostile(
                f"identity-{bad.rsplit('/', 1)[-1]}",
                ["run", "{d}/s.yaml", "--dry-run"],
                "identity",
                {"s.yaml": _machines_with(identity=bad)},
            )
        )
    return cases


def _run_cases() -> list[Hostile]:
    smoke = "scenarios/smoke.yaml"
    machines = yaml.safe_dump(
        MACHINES | {"hosts": [h | {"ssh": "root@192.0.2.1"} for h in MACHINES["hosts"]]}
    )
    return [
        Hostile("run-out-is-file", ["run", smoke, "--out", "{d}/f"], "not a directory", {"f": "x"}),
        Hostile("run-out-is-fifo", ["run", smoke, "--out", "{d}/f"], "not a directory", {"f": FIFO}),
        Hostile("run-out-not-empty", ["run", smoke, "--out", "{d}/o"], "is not empty", {"o/user.pcap": "x"}),
        Hostile(
            "run-force-no-manifest",
            ["run", smoke, "--out", "{d}/o", "--force"],
            "holds no sanlab manifest",
            {"o/customer.pcap": "x", "o/logs/app.log": "x"},
        ),
        Hostile(
            "run-force-forged-manifest",
            ["run", smoke, "--out", "{d}/o", "--force"],
            "not one sanlab wrote",
            {"o/.sanlab-manifest.json": '{"files": {}}', "o/x": "x"},
        ),
        Hostile(
            "run-force-manifest-escape",
            ["run", smoke, "--out", "{d}/o", "--force"],
            "outside the folder",
            {
                "o/.sanlab-manifest.json": '{"kind": "sanlab output manifest", "files": {"../x": null}}',
                "o/y": "",
            },
        ),
        Hostile(
            "run-force-manifest-fifo",
            ["run", smoke, "--out", "{d}/o", "--force"],
            "FIFO",
            {"o/.sanlab-manifest.json": FIFO, "o/y": ""},  # a FIFO: it would block
        ),
        Hostile("run-snaplen", ["run", smoke, "--snaplen", "10"], "'--snaplen'"),
        Hostile("run-no-scenario", ["run"], "give a SCENARIO"),
        Hostile("run-resume-and-scenario", ["run", smoke, "--resume", "{d}"], "give it alone"),
        Hostile("run-resume-missing", ["run", "--resume", "{d}/none"], "nothing to resume"),
        Hostile("run-resume-empty", ["run", "--resume", "{d}"], "nothing to resume"),
        Hostile(
            "run-resume-foreign",
            ["run", "--resume", "{d}"],
            "nothing to resume",
            {"results.json": '{"run": {}, "results": []}', "scenario.yaml": "name: x\n"},
        ),
        Hostile("run-resume-file", ["run", "--resume", "{d}/f"], "not a directory", {"f": "x"}),
        Hostile("lab-up-machines", ["lab", "up", "{d}/s.yaml"], "use 'sanlab run", {"s.yaml": machines}),
        Hostile("run-scenario-fifo", ["run", "{d}/s.yaml"], "not a regular file", {"s.yaml": FIFO}),
        Hostile(
            "run-scenario-huge", ["run", "{d}/s.yaml"], "a scenario or profile is at most", {"s.yaml": HUGE}
        ),
        Hostile("validate-folder", ["validate", "{d}"], "a directory"),
    ]


def _lab_cases() -> list[Hostile]:
    cases = []
    for name in ("../../victim", "/tmp", "a/b", "-x", "UPPER", "x" * 40, "$(id)", ".."):
        expect = name if name.startswith("-") else "is not allowed"  # click may read -x as an option
        for verb in (
            ["down", name],
            ["exec", name, "h", "--", "true"],
            ["export", name],
            ["check", name, "iscsi-wire"],
        ):
            cases.append(Hostile(f"lab-{verb[0]}-name-{name[:10]}", ["lab", *verb], expect, runtime=True))
    for value in ("nan", "-1", "inf", "0", "1e99", "abc", "-1s"):
        cases.append(
            Hostile(
                f"lab-exec-timeout-{value}",
                ["lab", "exec", "x", "h", "--timeout", value, "--", "true"],
                "'--timeout'",
            )
        )
    for value in ("-1s", "0", "999s", "nan", "2 s s"):
        cases.append(
            Hostile(f"lab-fault-down-{value}", ["lab", "fault", "x", "l", "--down", value], "'--down'")
        )
    for state, expect in (
        (FIFO, "FIFO"),
        (FOLDER, "a directory"),
        ("{", "not valid JSON"),
        (HUGE, "at most"),
    ):
        cases.append(
            Hostile(
                f"lab-state-{state.strip('<>') or 'torn'}",
                ["lab", "exec", "lab1", "h", "--", "true"],
                expect,
                {"run/sanlab-labs/lab1/state.json": state},
                runtime=True,
            )
        )
    return cases


def _spec(**changes: Any) -> str:
    spec: dict[str, Any] = {
        "axes": {"transport": ["nvme-rdma", "iser"], "iodepth": [1, 4]},
        "fixed": {"rw": "randread", "bs": "4k", "numjobs": 1},
        "goals": ["iops >= 1e5"],
    }
    for key, value in changes.items():
        section, _, name = key.partition("__")
        if name:
            spec[section][name] = value
        else:
            spec[section] = value
    return yaml.safe_dump(spec)


SWEEP_SPECS: list[tuple[str, dict[str, Any], str]] = [
    ("goal-unknown", {"goals": ["happiness >= 1"]}, "not a field of the results"),
    ("goal-text-field", {"goals": ["transport >= 1"]}, "not a field of the results"),
    ("goal-expression", {"goals": ["__import__('os').system('id') >= 1"]}, "is not a goal"),
    ("goal-no-number", {"goals": ["iops >= lots"]}, "is not a goal"),
    ("pareto-unknown", {"pareto": {"happiness": "max"}}, "not a field of the results"),
    ("pareto-text-field", {"pareto": {"fabric": "min"}}, "not a field of the results"),
    ("pareto-direction", {"pareto": {"iops": "most"}}, "'max' or 'min'"),
    ("link-nan", {"axes__link_gbps": [float("nan")]}, "link_gbps"),
    ("link-negative", {"axes__link_gbps": [-5]}, "greater than 0"),
    ("link-huge", {"axes__link_gbps": [1e9]}, "less than or equal to 800"),
    ("link-bool", {"axes__link_gbps": [True]}, "yes/no"),
    ("iodepth-zero", {"axes__iodepth": [0]}, "iodepth"),
    ("iodepth-huge", {"axes__iodepth": [10**9]}, "iodepth"),
    ("bs-zero", {"fixed__bs": 0}, "bs"),
    ("transport-unknown", {"axes__transport": ["fc"]}, "transport"),
    ("axis-unknown", {"axes__colour": ["red"]}, "not an option"),
    ("axis-empty", {"axes": {}}, "axes"),
    ("axis-twice", {"fixed__transport": "iser"}, "is also an axis"),
    ("solver", {"solver": "magic"}, "solver"),
    ("seed", {"seed": -1}, "seed"),
    (
        "too-many-points",
        {"axes__iodepth": list(range(1, 1025)), "axes__cores": list(range(1, 201))},
        "at most 200,000",
    ),
    ("profile-path", {"axes__profile": ["../../etc/passwd"]}, "profile"),
    ("core-unknown", {"axes__core": ["pentium"]}, "not a core design"),
]


def _sweep_cases() -> list[Hostile]:
    run = ["sweep", "{d}/spec.yaml", "--out", "{d}/out", "--serial"]
    cases = [
        Hostile(f"sweep-{name}", run, expect, {"spec.yaml": _spec(**changes)})
        for name, changes, expect in SWEEP_SPECS
    ]
    for name, content, expect in (
        ("fifo", FIFO, "not a regular file"),
        ("huge", HUGE, "at most"),
        ("list", "- 1\n", "mapping"),
    ):
        cases.append(Hostile(f"sweep-spec-{name}", run, expect, {"spec.yaml": content}))
    for address in (
        "bogus",
        "file:///etc/passwd",
        "udp://1.2.3.4:1",
        "tcp://host",
        "tcp://h:99999",
        "tcp://h:1;id",
    ):
        cases.append(
            Hostile(
                f"sweep-scheduler-{address[:12]}",
                ["sweep", "{d}/spec.yaml", "--out", "{d}/out", "--scheduler", address],
                "not a scheduler address",
                {"spec.yaml": _spec()},
            )
        )
    manifest = json.dumps({"kind": "sanlab output manifest", "files": {}})
    planted = {
        "spec.yaml": _spec(),
        "out/.sanlab-manifest.json": manifest,
        "out/sweep.json": "<symlink:/etc/passwd>",
    }
    cases.append(Hostile("sweep-out-symlink", run, "not one sanlab wrote", planted))
    cases.append(
        Hostile(
            "sweep-out-garbage-manifest",
            run,
            "not valid JSON",
            {"spec.yaml": _spec(), "out/.sanlab-manifest.json": "{"},
        )
    )
    return cases


GOOD_RECORD = {
    "mode": "measured",
    "transport": "nvme-tcp",
    "fabric": "eth",
    "rw": "randread",
    "bs": 4096,
    "iodepth": 1,
    "numjobs": 1,
    "iops": 5000,
}

RECORDS: list[tuple[str, dict[str, Any], str]] = [
    ("iops-nan", {"iops": float("nan")}, "finite"),
    ("iops-inf", {"iops": float("inf")}, "finite"),
    ("iops-negative", {"iops": -5}, "greater than 0"),
    ("iops-text", {"iops": "many"}, "valid number"),
    ("iops-1e300", {"iops": 1e300}, "less than or equal to"),
    ("bs-zero", {"bs": 0}, "bs"),
    ("bs-odd", {"bs": 1000}, "multiple of 512"),
    ("link-negative", {"link_gbps": -5}, "greater than 0"),
    ("link-nan", {"link_gbps": float("nan")}, "finite"),
    ("iodepth-1e9", {"iodepth": 1e9}, "results[1].iodepth"),
    ("iodepth-zero", {"iodepth": 0}, "greater than or equal to 1"),
    ("numjobs-float", {"numjobs": 1.5}, "numjobs"),
    ("fabric-missing", {"fabric": None}, "fabric"),
    ("transport-unknown", {"transport": "fc"}, "transport"),
    ("rw-unknown", {"rw": "trim"}, "rw"),
    ("stack-unknown", {"target_stack": "windows"}, "target_stack"),
    ("mtu-tiny", {"mtu": 1}, "mtu"),
    ("lat-negative", {"lat_mean_us": -1}, "lat_mean_us"),
]


def _calibrate_cases() -> list[Hostile]:
    run = ["calibrate", "--runs", "{d}/r", "--name", "mine"]
    cases = []
    for name, change, expect in RECORDS:
        record = {k: v for k, v in (GOOD_RECORD | change).items() if v is not None}
        document = json.dumps({"results": [GOOD_RECORD, record]})
        cases.append(Hostile(f"calibrate-{name}", run, expect, {"r/results.json": document}))
    for name, content, expect in (
        ("fifo", FIFO, "FIFO"),
        ("folder", FOLDER, "a directory"),
        ("huge", HUGE, "at most"),
        ("list", "[1, 2]", '"results" list'),
        ("not-json", "{", "not valid JSON"),
        ("record-not-object", '{"results": [1]}', "not a record"),
        ("no-results", '{"run": {}}', '"results" list'),
    ):
        cases.append(Hostile(f"calibrate-file-{name}", run, expect, {"r/results.json": content}))
    cases.append(Hostile("calibrate-missing", run, "cannot read"))
    return cases


def _profile_cases() -> list[Hostile]:
    model = ["model", "--profile", "{d}/a.yaml"]
    cycle = "name: a\ninitiator: {from: {d}/b.yaml}\n"
    return [
        Hostile("profile-self", model, "in a circle", {"a.yaml": "name: a\ninitiator: {from: {d}/a.yaml}\n"}),
        Hostile(
            "profile-cycle",
            model,
            "in a circle",
            {"a.yaml": cycle, "b.yaml": "name: b\ninitiator: {from: {d}/a.yaml}\n"},
        ),
        Hostile("profile-fifo", model, "not a regular file", {"a.yaml": FIFO}),
        Hostile("profile-huge", model, "at most", {"a.yaml": HUGE}),
        Hostile("profile-not-yaml", model, "not valid YAML", {"a.yaml": "a: [\n"}),
        Hostile(
            "profile-from-missing",
            model,
            "is not a profile",
            {"a.yaml": "name: a\ninitiator: {from: nosuch}\n"},
        ),
        Hostile("profile-bigint", model, "at most 40", {"a.yaml": "name: a\ncores: " + "9" * 5000 + "\n"}),
        *(
            Hostile(f"model-{flag[2:]}-{transport}", ["model", *point(transport, "roce"), flag], "has no")
            for transport in ("nvme-rdma", "iser", "srp")
            for flag in ("--data-digest", "--header-digest")
        ),
        Hostile("model-report-device", ["model", "--report", "/dev/null"], "not a directory"),
    ]


def _analyze_cases() -> list[Hostile]:
    golden = "tests/golden/nvme-tcp.pcap"
    return [
        Hostile("analyze-ladder-device", ["analyze", golden, "--ladder", "/dev/full"], "not a regular file"),
        Hostile(
            "analyze-latency-device", ["analyze", golden, "--latency", "/dev/null"], "not a regular file"
        ),
        Hostile(
            "analyze-ladder-fifo",
            ["analyze", golden, "--ladder", "{d}/f.svg"],
            "not a regular file",
            {"f.svg": FIFO},
        ),
        Hostile(
            "analyze-ladder-folder",
            ["analyze", golden, "--ladder", "{d}/f.svg"],
            "is a directory",
            {"f.svg/x": ""},
        ),
        Hostile("analyze-io-negative", ["analyze", golden, "--io", "-1"], "'--io'"),
        Hostile(
            "analyze-io-past",
            ["analyze", golden, "--ladder", "{d}/l.svg", "--io", "100000"],
            "the capture has",
        ),
        Hostile(
            "analyze-decode-shell", ["analyze", golden, "--decode-as", "tcp.port==1;id,iscsi"], "--decode-as"
        ),
        Hostile(
            "analyze-decode-proto", ["analyze", golden, "--decode-as", "tcp.port==3262,http"], "--decode-as"
        ),
        Hostile(
            "analyze-decode-port", ["analyze", golden, "--decode-as", "tcp.port==99999,iscsi"], "--decode-as"
        ),
        Hostile("analyze-fifo", ["analyze", "{d}/c.pcap"], "not a regular file", {"c.pcap": FIFO}),
    ]


def corpus() -> list[Hostile]:
    return (
        _ssh_cases()
        + _inventory_cases()
        + _destination_cases()
        + _run_cases()
        + _lab_cases()
        + _sweep_cases()
        + _calibrate_cases()
        + _profile_cases()
        + _analyze_cases()
    )

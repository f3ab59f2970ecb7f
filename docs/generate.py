"""Write the documentation pages and pictures that come from the code, before `mkdocs build`.

- ``docs/reference/scenarios.md``: every section and field of a scenario
  file, from ``scenarios/schema.json`` (the schema the loader enforces).
- ``docs/reference/cli.md``: every command's ``--help``, from the click
  commands themselves.
- ``docs/generated/ladder-*.svg``: I/Os of the golden captures, drawn by the
  analyser (needs tshark); the handouts' without frame sizes, whose sums are
  what labs 3 and 4 ask for.
- ``docs/generated/sweep-pareto.png``: a sweep of the shipped spec, by MVA.
- ``docs/labs/keys/generated/``: the answer keys' pictures (lab 1's iSCSI
  read with its sizes, lab 6's projections).  Under ``labs/keys/``, which the
  student site excludes whole, so no key picture is ever in its folder.
- ``docs/generated/setup-LAB.svg``: each lab's set-up, from its scenario file.

Nothing here is hand-maintained, so the site cannot drift from the code.

    python docs/generate.py
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
# The scenario's own fields first, then its sections in the order a file usually gives them;
# every model of the schema must be here (a test walks the schema to hold it so).
ORDER = [
    "Scenario",
    "KernelGuest",
    "Host",
    "Switch",
    "Link",
    "Target",
    "Chap",
    "NvmeAuth",
    "NvmeTls",
    "Workload",
    "Fault",
    "Flow",
    "Projection",
    "KnownBug",
]


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    if "const" in spec:
        return f"`{spec['const']}`"
    if "anyOf" in spec:
        return " or ".join(_type(s) for s in spec["anyOf"] if s.get("type") != "null")
    if spec.get("type") == "array":
        return f"list of {_type(spec.get('items', {}))}"
    return str(spec.get("type", "any"))


def _limits(spec: dict[str, Any]) -> str:
    from sanlab.scenarios.schema import PATTERN_HINTS

    parts = []
    for key, word in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ):
        if key in spec:
            parts.append(f"{word} {spec[key]}")
    for key, word in (("minItems", "at least"), ("maxItems", "at most"), ("minLength", "length ≥")):
        if key in spec:
            parts.append(f"{word} {spec[key]}")
    if "pattern" in spec:
        parts.append(PATTERN_HINTS.get(spec["pattern"], f"`{spec['pattern']}`"))
    for option in spec.get("anyOf", []):
        parts += [p for p in [_limits(option)] if p]
    return "; ".join(parts)


def scenario_reference() -> str:
    schema = json.loads((REPO / "scenarios" / "schema.json").read_text())
    models = {"Scenario": schema, **schema["$defs"]}
    lines = [
        "# Scenario files",
        "",
        "Generated from `scenarios/schema.json` by `docs/generate.py`. `sanlab validate FILE` checks a",
        "file against exactly this, and more: the rules between fields below the tables.",
        "",
    ]
    missing = sorted(set(models) - set(ORDER))
    if missing:
        raise SystemExit(f"docs/generate.py: ORDER lacks the schema's {', '.join(missing)}")
    for name in ORDER:
        model = models[name]
        lines += [f"## {name}", "", (model.get("description") or "").strip(), ""]
        lines += ["| field | type | default | limits |", "|---|---|---|---|"]
        required = set(model.get("required", []))
        for field, spec in model["properties"].items():
            default = "required" if field in required else f"`{json.dumps(spec.get('default'))}`"
            lines.append(f"| `{field}` | {_type(spec)} | {default} | {_limits(spec)} |")
        lines.append("")
    lines += ["## Fields, ranges and rules", "", '--8<-- "scenarios/README.md"', ""]
    return "\n".join(lines)


def cli_reference() -> str:
    from sanlab.main import cli

    lines = ["# Command line", "", "Generated from the commands themselves by `docs/generate.py`.", ""]
    for path, command in _commands(cli, ["sanlab"]):
        with click.Context(command, info_name=" ".join(path)) as ctx:
            lines += [f"## `{' '.join(path)}`", "", "```text", command.get_help(ctx), "```", ""]
    return "\n".join(lines)


def _commands(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):  # asked by name: sanlab's group imports its verbs lazily
        context = click.Context(command)
        for name in sorted(command.list_commands(context)):
            sub = command.get_command(context, name)
            if sub is not None:
                found += _commands(sub, [*path, name])
    return found


def _ladder(capture: str, op: str, size: int, path: Path, **options: Any) -> None:
    from sanlab.dissectors import pictures
    from sanlab.dissectors.analyze import analyze

    result = analyze(REPO / "tests" / "golden" / f"{capture}.pcap", labels=True)
    io = next(i for i in result.ios if i.op == op and i.nbytes == size)
    pictures.ladder(io, path, **options)


def lab_pictures(out: Path, keys: Path) -> None:
    """The handouts' ladders, with no frame sizes (labs 3 and 4 ask for their sum); the home
    page's, runs of alike packets merged so it reads on a phone; and the keys' pictures."""
    for capture, op, size, name in LADDERS:
        _ladder(capture, op, size, out / f"ladder-{name}.svg", sizes=False)
    _ladder("nvme-rdma-rxe", "read", 16384, out / "home-nvme-rdma-read.svg", sizes=False, max_arrows=0)
    _ladder("iscsi-tcp", "read", 4096, keys / "ladder-iscsi-read.svg")
    project_chart(keys / "lab-project-100g.png")


def debugging_pictures(out: Path) -> None:
    """The debugging page's ladders: a 4 KiB read inside TLS, decrypted with its shipped key
    log; DH-HMAC-CHAP on NVMe/TCP's admin queue with the right secret and with a wrong one."""
    _ladder("nvme-tls", "read", 4096, out / "ladder-tls-read.svg")
    for capture in ("nvme-auth-tcp", "nvme-auth-tcp-wrong", "nvme-auth-rdma"):
        _auth_ladder(capture, out / f"ladder-{capture.removeprefix('nvme-')}.svg")


def _auth_ladder(capture: str, path: Path) -> None:
    """The admin queue's authentication, Connect to the last DH-HMAC-CHAP message, as one
    ladder (it is no read or write, so the analyser has no I/O to draw)."""
    from sanlab.dissectors import pictures
    from sanlab.dissectors.attribute import Io
    from sanlab.dissectors.frames import read_frames

    frames = read_frames(REPO / "tests" / "golden" / f"{capture}.pcap", labels=True)[0]
    auth = [i for i, f in enumerate(frames) if pictures.AUTH_MESSAGE.search(f.label)]
    first = next(i for i in range(auth[0], -1, -1) if "NVMeOF Connect" in frames[i].label)
    last = next(i for i in auth if re.search(r"Success1|Failure", frames[i].label))  # the admin queue's end
    shown = [f for f in frames[first : last + 1] if f.stream == frames[auth[0]].stream or f.bth >= 0]
    shown = [f for f in shown if f.tcp_len > 0 or (f.bth >= 0 and "Acknowledge" not in f.label)]
    io = Io("other", 0, "", frames[first].src, frames=shown)  # the host sends Connect
    pictures.ladder(io, path, title=f"{capture}: DH-HMAC-CHAP on the admin queue")


# The answer keys' pictures: never in docs/generated/, which the student site copies whole.
KEY_PICTURES = ("ladder-iscsi-read.svg", "lab-project-100g.png")
# The handouts' ladder diagrams: (golden capture, op, bytes, picture name).
LADDERS = [
    ("nvme-rdma-rxe", "read", 16384, "nvme-rdma"),
    ("nvme-tcp", "read", 4096, "nvme-tcp-read"),
    ("srp-rxe", "write", 4096, "srp-write"),
    ("nvme-rdma-siw", "write", 16384, "iwarp-write"),
]


# Lab 6's set-ups: (label, options of sanlab model).
LAB6 = [
    ("4k, 1 job", {"bs": "4k", "numjobs": 1}),
    ("4k, 8 jobs", {"bs": "4k", "numjobs": 8}),
    ("4k, 8 jobs, 4 cores", {"bs": "4k", "numjobs": 8, "cores": 4}),
    ("64k, 8 jobs", {"bs": "64k", "numjobs": 8}),
    ("64k, 8 jobs, 4 initiators", {"bs": "64k", "numjobs": 8, "initiators": 4}),
]


def project_chart(path: Path) -> None:
    import subprocess

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = {"transport": "nvme-rdma", "fabric": "roce", "link-gbps": 100, "rw": "randread", "iodepth": 32}
    rows = []
    for label, options in LAB6:
        argv = [sys.executable, "-m", "sanlab", "model", "--json"]
        for key, value in (base | options).items():
            argv += [f"--{key}", str(value)]
        run = subprocess.run(argv, capture_output=True, text=True, check=True)
        record = json.loads(run.stdout)["results"][0]
        rows.append((label, record["iops"], record["bottleneck"]))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    bars = ax.barh([r[0] for r in rows], [r[1] / 1e6 for r in rows], color="#4a7ab0")
    for bar, (_, _, bottleneck) in zip(bars, rows, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f"  {bottleneck}", va="center")
    ax.set_xlabel("projected IOPS (millions), NVMe/RDMA randread QD32, modern-100g")
    ax.invert_yaxis()
    ax.set_xlim(0, max(r[1] for r in rows) / 1e6 * 1.35)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# The QD 1 budget chart: each transport on the fabric the default profile gives it
# natively, and the colour of each group of hops.
BUDGET_SETUPS = [
    ("nvme-rdma", "roce"),
    ("iser", "roce"),
    ("srp", "ib"),
    ("nvme-tcp", "eth"),
    ("iscsi", "eth"),
]
BUDGET_GROUPS = {
    "initiator CPU": "#4a7ab0",
    "interrupts": "#e0a040",
    "NICs, PCIe, wire": "#8a8a8a",
    "target CPU": "#5aa05a",
    "device": "#b05a5a",
}


# A group of hops narrower than this in every bar is left out of the chart and its legend.
VISIBLE_US = 0.05


def _budget_group(hop_name: str, side: str) -> str:
    if hop_name.endswith("-interrupt"):
        return "interrupts"
    if hop_name.startswith("device"):
        return "device"
    return {"initiator": "initiator CPU", "target": "target CPU"}.get(side, "NICs, PCIe, wire")


def budget_chart(path: Path) -> None:
    """QD 1 4 KiB reads on the default profile, each transport's latency as its named hops."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sanlab.models.core.budget import qd1_budget
    from sanlab.models.core.network import Point

    rows = []
    for transport, fabric in BUDGET_SETUPS:
        totals = dict.fromkeys(BUDGET_GROUPS, 0.0)
        for hop in qd1_budget(Point(transport, fabric, 100, "randread", 4096, 1, 1)):
            totals[_budget_group(hop.name, hop.side)] += hop.us
        rows.append((f"{transport}/{fabric}", totals))
    shown = [g for g in BUDGET_GROUPS if any(totals[g] >= VISIBLE_US for _, totals in rows)]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for y, (_, totals) in enumerate(rows):
        left = 0.0
        for group in shown:
            ax.barh(y, totals[group], left=left, color=BUDGET_GROUPS[group], label=group if y == 0 else None)
            left += totals[group]
        ax.text(left, y, f"  {sum(totals.values()):.1f} µs", va="center")
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("projected QD 1 latency of a 4 KiB read, µs (modern-100g, 100 GbE; sanlab model --budget)")
    ax.set_xlim(0, ax.get_xlim()[1] * 1.15)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(shown), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sweep_chart(out: Path) -> None:
    from sanlab.models.sweeps.sweep import SweepSpec, expand
    from sanlab.models.sweeps.sweep_run import run_sweep
    from sanlab.scenarios.yamlfile import load_yaml

    data = load_yaml(REPO / "scenarios" / "sweeps" / "two-million.yaml") | {"solver": "mva"}
    grid = expand(SweepSpec.model_validate(data))
    with tempfile.TemporaryDirectory() as tmp:
        run_sweep(grid, Path(tmp) / "sweep", workers=0)
        (out / "sweep-pareto.png").write_bytes((Path(tmp) / "sweep" / "pareto.png").read_bytes())


def setup_diagrams(out: Path) -> None:
    """Each lab's hosts, stacks and cables, drawn from its scenario: the set-up, never an answer."""
    if str(DOCS) not in sys.path:
        sys.path.insert(0, str(DOCS))
    import setup_diagram

    from sanlab.scenarios.loader import load_scenario

    for path in sorted((REPO / "scenarios" / "labs").glob("*.yaml")):
        if not path.name.endswith(".checks.yaml"):
            setup_diagram.write(load_scenario(path), out / f"setup-{path.stem}.svg")


def main() -> None:
    (DOCS / "reference").mkdir(exist_ok=True)
    (DOCS / "generated").mkdir(exist_ok=True)
    keys = DOCS / "labs" / "keys" / "generated"
    keys.mkdir(exist_ok=True)
    for stale in KEY_PICTURES:  # where earlier versions of this script wrote the keys' pictures
        old = DOCS / "generated" / stale
        if old.is_file() and not old.is_symlink():
            old.unlink()
    (DOCS / "reference" / "scenarios.md").write_text(scenario_reference())
    (DOCS / "reference" / "cli.md").write_text(cli_reference())
    lab_pictures(DOCS / "generated", keys)
    debugging_pictures(DOCS / "generated")
    sweep_chart(DOCS / "generated")
    budget_chart(DOCS / "generated" / "qd1-budget.png")
    setup_diagrams(DOCS / "generated")
    print(f"wrote {DOCS / 'reference'}, {DOCS / 'generated'} and {keys}", file=sys.stderr)


if __name__ == "__main__":
    from sanlab.scenarios.errors import SanlabError

    try:
        main()
    except SanlabError as exc:  # a broken scenario or profile: one line, exit 1
        sys.exit(f"docs/generate.py: {exc}")

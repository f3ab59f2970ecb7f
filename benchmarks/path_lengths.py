"""Instructions per I/O of the code sanlab runs (issue #46, item 2): models/data/paths/path-lengths.csv.

    flock /tmp/sanlab-vm.lock .venv/bin/python benchmarks/path_lengths.py [TARGET ...] [--again] [--quick]

``--bs=N`` runs only the cells of that block size (4096 first: the most wanted).
TARGET is one of nvme-tcp-none, iscsi-none, nvme-rdma-rxe, iser-rxe, srp-rxe, nvme-rdma-siw,
iser-siw (default: all).  One lab (a cable each for TCP, rxe and siw) serves them all; cells
run most wanted first, across every target, and no cell starts after 21 min (or
$PATHS_STOP_AT, a UTC epoch), so the shared VM lock is held under 25 min.  Cells the table
already holds are skipped (``--again`` measures them anew): run it again for the rest.
``--quick`` checks the pipeline (one cell, a quarter of the I/Os) into /tmp only.

Method (models/data/paths/README.md says why, and what it costs in accuracy): both
guests run under QEMU's ``-icount shift=S`` (emulator/qemu.py's $SANLAB_ICOUNT), so their
clocks advance 2**S ns per instruction executed; ``perf record -e cpu-clock -c P -a`` in each
guest then takes one sample per P/2**S instructions executed.  A loop of known length
calibrates what a sample is worth.  Each cell (rw, bs, QD) runs twice, with N/4 and N I/Os:
the difference cancels what both runs share (fio's start, perf's start).  Samples the halted
CPU takes are dropped, and so is, per halted sample, what the idle guests do (measured first:
background and the profiler's own wake-ups).  Samples go to groups by
models/data/paths/path-groups.yaml.  Rows of the measured cells replace those in the CSV.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import path_profile as prof  # noqa: E402

from sanlab.emulator.images import require_image  # noqa: E402
from sanlab.emulator.lab import Lab  # noqa: E402
from sanlab.emulator.lab_state import new_run_dir  # noqa: E402
from sanlab.emulator.qemu import Vm  # noqa: E402
from sanlab.models.core.paths import GROUPS, host_groups, load_paths, write_rows  # noqa: E402
from sanlab.scenarios.errors import SanlabError  # noqa: E402
from sanlab.scenarios.loader import parse_scenario  # noqa: E402
from sanlab.targets.placement import place  # noqa: E402
from sanlab.targets.stacks import exported  # noqa: E402

SHIFT = 3  # 8 ns of guest time per instruction: about the speed TCG runs at here
WORTH = 50_000  # instructions per sample, nominal
PERIOD_NS = WORTH << SHIFT
PERF = f"LD_LIBRARY_PATH={prof.GUEST_DIR}/lib {prof.GUEST_DIR}/perf"
REPORT = "report -n -t '|' --sort comm,dso,sym -q --percent-limit 0 --stdio"
# (transport, stack, link, provider): one lab, one cable per carrier, so a single boot serves them all.
TARGETS = [
    ("nvme-tcp", "nvmet", "wire", "none"),
    ("iscsi", "lio", "wire", "none"),
    ("nvme-rdma", "nvmet", "roce", "rxe"),
    ("iser", "lio", "roce", "rxe"),
    ("srp", "lio", "roce", "rxe"),
    ("nvme-rdma", "nvmet", "iwarp", "siw"),
    ("iser", "tgt", "iwarp", "siw"),
]
LINKS = {"wire": {"fabric": "eth"}, "roce": {"fabric": "roce", "rdma_driver": "rxe"},
         "iwarp": {"fabric": "iwarp", "rdma_driver": "siw"}}  # fmt: skip
# The cells, most wanted first: a lock's time may end before the last.
CELLS = [
    ("randread", 4096, 1), ("randwrite", 4096, 1), ("randread", 4096, 32), ("randwrite", 4096, 32),
    ("randread", 65536, 1), ("randwrite", 65536, 1), ("randread", 65536, 32), ("randwrite", 65536, 32),
]  # fmt: skip
OUT = prof.ROOT / "models" / "data" / "paths" / "path-lengths.csv"
# No cell starts after this (time.monotonic()): one lab holds the shared VM lock 25 min at most.
DEADLINE = [float("inf")]
BUDGET_S = 21 * 60
RAW = prof.ROOT / "models" / "data" / "paths" / "path-lengths.runs.jsonl"
BLOCKS = {4096, 65536}  # --bs=N narrows it


def say(line: str) -> None:
    print(f"{datetime.datetime.now(datetime.UTC):%H:%M:%S} {line}", flush=True)


def name_of(target: tuple[str, str, str, str]) -> str:
    return f"{target[0]}-{target[3]}"


def scenario(chosen: list[tuple[str, str, str, str]]) -> dict[str, object]:
    links = sorted({t[2] for t in chosen})
    return {
        "description": "path lengths",
        "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
        "links": [{"name": k, "endpoints": ["initiator", "target"], "mtu": 1500, **LINKS[k]} for k in links],
        "targets": [
            {
                "name": name_of(t),
                "host": "target",
                "link": t[2],
                "transport": t[0],
                "stack": t[1],
                "backstore": "ramdisk",
                "size": "64m",
            }
            for t in chosen
        ],  # fmt: skip
        "workloads": [{"rw": "randread", "bs": "4k", "iodepth": 1, "runtime": "1s"}],
    }


def must(vm: Vm, command: str, timeout: float = 600) -> str:
    done = vm.run(command, timeout=timeout)
    if done.rc != 0:
        raise SystemExit(f"{vm.name}: {command[:80]}: rc {done.rc}: {done.stderr[-400:]}")
    return done.stdout


MODULES: dict[str, dict[str, str]] = {}  # per guest: each module symbol's module (kallsyms)
RAW_ROWS: list[object] = []  # every report's symbols and samples, for runs.jsonl


def report(vm: Vm, data: str) -> list[tuple[str, str, str, int]]:
    if vm.name not in MODULES:
        MODULES[vm.name] = prof.kallsyms_modules(must(vm, "awk 'NF == 4' /proc/kallsyms"))
    rows = prof.in_modules(_report(vm, data), MODULES[vm.name])
    RAW_ROWS.append({"host": vm.name, "data": data, "rows": rows})
    return rows


def _report(vm: Vm, data: str) -> list[tuple[str, str, str, int]]:
    return prof.parse_report(
        must(
            vm,
            f"{PERF} {REPORT} -i {data} 2>/tmp/report.err || {{ tail -5 /tmp/report.err >&2; exit 1; }}",
            900,
        )
    )


def prepare(vm: Vm) -> None:
    must(vm, "sysctl -qw kernel.perf_cpu_time_max_percent=0 "
             "kernel.kptr_restrict=0 kernel.perf_event_paranoid=-1")  # fmt: skip


def calibrate(vm: Vm, mapping: prof.Mapping) -> dict[str, float]:
    """What one sample is worth, from a loop of 2N instructions; and what a 64 KiB ``rep movsb``
    (one instruction on hardware) counts as here."""
    n, times = 300_000_000, 2000
    must(
        vm,
        f"{PERF} record -q -e cpu-clock -c {PERIOD_NS} -a -o /tmp/cal.data -- {prof.GUEST_DIR}/calib s {n}",
    )
    spin = sum(k for c, d, s, k in report(vm, "/tmp/cal.data") if s.endswith(" spin"))
    must(vm, f"{PERF} record -q -e cpu-clock -c {PERIOD_NS} -a -o /tmp/cal.data -- "
             f"{prof.GUEST_DIR}/calib m 65536 {times}")  # fmt: skip
    movs = sum(k for c, d, s, k in report(vm, "/tmp/cal.data") if s.endswith(" movs"))
    worth = 2 * n / spin
    return {"worth": worth, "spin_samples": spin, "nominal": WORTH, "movsb_64k": movs * worth / times,
            "movs_samples": movs}  # fmt: skip


def fio(dev: str, rw: str, bs: int, qd: int, ios: int) -> str:
    return (
        f"fio --name=p --filename={dev} --direct=1 --ioengine=libaio --rw={rw} --bs={bs} --iodepth={qd} "
        f"--size=64m --io_size={ios * bs} --norandommap --randrepeat=0 --output-format=json "
        "--output=/tmp/fio.json"
    )


Run = tuple[dict[str, int], dict[str, int], int, int]  # initiator's groups, target's, I/Os, frames


def frames(vm: Vm, link: str) -> int:
    """Frames the initiator's link NIC has sent and received: both directions of the wire."""
    stats = f"/sys/class/net/{link}/statistics"
    return sum(int(x) for x in must(vm, f"cat {stats}/tx_packets {stats}/rx_packets").split())


def one_run(ini: Vm, tgt: Vm, command: str, mapping: prof.Mapping, link: str) -> Run:
    """Both guests profiled while ``command`` runs on the initiator: (initiator's groups,
    target's groups, I/Os fio completed, frames on the wire)."""
    must(tgt, "rm -f /tmp/t.data")
    # The assignment before exec: "exec VAR=x cmd" would look for a program named "VAR=x".
    pid = tgt.spawn(
        f"{PERF.replace(' ', ' exec ', 1)} record -q -e cpu-clock -c {PERIOD_NS} -a -o /tmp/t.data",
        "/tmp/t.log",
    )
    must(
        tgt,
        "for i in $(seq 200); do [ -s /tmp/t.data ] && break; sleep 0.1; done; sleep 0.5; [ -s /tmp/t.data ] "
        "|| { cat /tmp/t.log >&2; exit 1; }",
    )
    before = frames(ini, link)
    must(ini, f"{PERF} record -q -e cpu-clock -c {PERIOD_NS} -a -o /tmp/i.data -- {command}", 1800)
    wire = frames(ini, link) - before
    # The agent reaps its children late: a perf that has finished stays a zombie until then.
    alive = f"kill -0 {pid} 2>/dev/null && ! grep -q zombie /proc/{pid}/status"
    must(tgt, f"kill -INT {pid}; for i in $(seq 600); do {alive} || exit 0; sleep 0.2; done; exit 1", 180)
    with ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(lambda a: report(*a), [(ini, "/tmp/i.data"), (tgt, "/tmp/t.data")]))
    done = json.loads(ini.get("/tmp/fio.json"))["jobs"][0]
    ios = int(done["read"]["total_ios"]) + int(done["write"]["total_ios"])
    return dict(prof.grouped(rows[0], mapping)), dict(prof.grouped(rows[1], mapping)), ios, wire


def idle(ini: Vm, tgt: Vm, mapping: prof.Mapping) -> tuple[dict[str, float], dict[str, float]]:
    cmd = f"{PERF} record -q -e cpu-clock -c {PERIOD_NS} -a -o /tmp/idle.data -- sleep 3"
    with ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(lambda vm: (must(vm, cmd), report(vm, "/tmp/idle.data"))[1], [ini, tgt]))
    return prof.idle_rates(prof.grouped(rows[0], mapping)), prof.idle_rates(prof.grouped(rows[1], mapping))


def cell_rows(
    key: dict[str, object], runs: tuple[Run, Run], rates: tuple[dict[str, float], ...], worth: float
) -> list[dict[str, object]]:
    """One cell's rows, both sides, every group: the long run less the short one, per I/O."""
    short, long = runs
    ios = long[2] - short[2]
    rows: list[dict[str, object]] = []
    for k, side in enumerate(("initiator", "target")):
        a, b = prof.corrected(Counter(long[k]), rates[k]), prof.corrected(Counter(short[k]), rates[k])
        for group in GROUPS:
            raw = (long[k].get(group, 0), short[k].get(group, 0))
            got = prof.per_io(a.get(group, 0.0), b.get(group, 0.0), *raw, ios, worth)
            rows.append(
                key
                | {"side": side, "group": group, "instructions_per_io": round(got.instructions, 1)}
                | {"ci95_per_io": round(got.ci95, 1), "samples": raw[0] - raw[1], "ios": ios}
                | {"frames_per_io": round((long[3] - short[3]) / ios, 2)}
            )
    return rows


def _stamp() -> str:
    return f"{datetime.datetime.now(datetime.UTC):%FT%TZ}"


def measure_cell(lab: Lab, t: tuple[str, str, str, str], dev: str, cell: tuple[str, int, int], n: int,
                 ctx: dict[str, object]) -> None:  # fmt: skip
    """Two runs of one cell on one target; its rows into the table, its raw counts into the log."""
    rw, bs, qd = cell
    ini, tgt = lab.vms["initiator"], lab.vms["target"]
    mapping, rates, worth = ctx["mapping"], ctx["rates"], float(str(ctx["worth"]))
    started = time.monotonic()
    runs = (one_run(ini, tgt, fio(dev, rw, bs, qd, n // 4), mapping, t[2]),  # type: ignore[arg-type]
            one_run(ini, tgt, fio(dev, rw, bs, qd, n), mapping, t[2]))  # type: ignore[arg-type]  # fmt: skip
    key: dict[str, object] = {
        "transport": t[0],
        "stack": t[1],
        "provider": t[3],
        "rw": rw,
        "bs": bs,
        "iodepth": qd,
    }
    rows = cell_rows(key, runs, rates, worth)  # type: ignore[arg-type]
    if float(str(rows[0]["frames_per_io"])) < 1:  # sanlab handed over another target's device
        say(f"{name_of(t)} {cell}: its I/O did not cross its cable ({dev}); not tabled")
        return
    write_rows(OUT, rows)
    with RAW.open("a") as raw:
        raw.write(
            json.dumps(
                key
                | {"short": runs[0], "long": runs[1], "idle": rates, "worth": worth, "at": _stamp()}
                | {"symbols": RAW_ROWS[-4:]}  # the short and long runs' reports, both guests
            )
        )
        raw.write("\n")
    mine = host_groups(t[0])
    totals = [
        sum(float(str(r["instructions_per_io"])) for r in rows if r["side"] == side and r["group"] in mine)
        for side in ("initiator", "target")
    ]
    say(f"{name_of(t)} {rw} {bs // 1024}k QD{qd}: {rows[0]['ios']} I/Os, {rows[0]['frames_per_io']} frames"
        f"/I/O; "
        f"host cost initiator {totals[0] / 1e3:.1f} k, target {totals[1] / 1e3:.1f} k instructions/I/O "
        f"({time.monotonic() - started:.0f} s)")  # fmt: skip


def measured() -> set[tuple[str, ...]]:
    """The cells the table already holds (a later lock's run goes on from there)."""
    if not OUT.exists():
        return set()
    return {(c.transport, c.provider, c.rw, str(c.bs), str(c.iodepth)) for c in load_paths(OUT).cells()}


def export_all(lab: Lab, chosen: list[tuple[str, str, str, str]], steps: ExitStack) -> dict[str, str]:
    """Every target exported and connected for the whole lab; one that fails is said and left out."""
    devices = {}
    for t in chosen:
        target = next(x for x in lab.scenario.targets if x.name == name_of(t))
        wire = place(lab.scenario, target, lab.vms, lab.blueprint.endpoints).wiring
        try:
            devices[name_of(t)] = steps.enter_context(exported(target, name_of(t), wire, say))[0]
            say(f"{name_of(t)}: exported ({t[1]}) as {devices[name_of(t)]}")
        except SanlabError as exc:
            say(f"{name_of(t)}: NOT MEASURED: {exc}")
    return devices


def run_lab(lab: Lab, chosen: list[tuple[str, str, str, str]], quick: bool, again: bool) -> int:
    ini, tgt = lab.vms["initiator"], lab.vms["target"]
    for vm in (ini, tgt):
        prepare(vm)
    mapping = prof.Mapping.load()
    cal = calibrate(ini, mapping)
    say(f"calibration: a sample is worth {cal['worth']:.0f} instructions (nominal {WORTH}, "
        f"{cal['spin_samples']} samples); a 64 KiB rep movsb counts {cal['movsb_64k']:.0f}")  # fmt: skip
    with RAW.open("a") as raw:
        raw.write(
            json.dumps({"calibration": cal, "shift": SHIFT, "period_ns": PERIOD_NS, "at": _stamp()}) + "\n"
        )
    done, count = set() if again else measured(), 0
    with ExitStack() as steps:
        devices = export_all(lab, chosen, steps)
        MODULES.clear()  # read kallsyms again: the transports' modules have loaded since calibration
        rates = idle(ini, tgt, mapping)
        say(f"idle background per halted sample: initiator {sum(rates[0].values()):.3f}, "
            f"target {sum(rates[1].values()):.3f}")  # fmt: skip
        ctx = {"mapping": mapping, "rates": rates, "worth": cal["worth"]}
        for cell in CELLS[:1] if quick else [c for c in CELLS if c[1] in BLOCKS]:
            for t in [t for t in chosen if name_of(t) in devices]:
                if (t[0], t[3], cell[0], str(cell[1]), str(cell[2])) in done:
                    continue
                if time.monotonic() > DEADLINE[0]:
                    say(f"out of this lock's time at {name_of(t)} {cell}: run again for the rest")
                    return count
                n = (2000 if cell[1] == 4096 else 800) // (4 if quick else 1)
                measure_cell(lab, t, devices[name_of(t)], cell, n, ctx)
                count += 1
    return count


def main(argv: list[str]) -> int:
    global OUT, RAW
    quick, again = "--quick" in argv, "--again" in argv
    if quick:  # a check of the pipeline: its figures never reach models/data
        OUT, RAW = Path("/tmp/path-lengths-quick.csv"), Path("/tmp/path-lengths-quick.runs.jsonl")
    BLOCKS.intersection_update({int(a[5:]) for a in argv if a.startswith("--bs=")} or BLOCKS)
    wanted = [a for a in argv if not a.startswith("--")]
    chosen = [t for t in TARGETS if not wanted or name_of(t) in wanted]
    if not chosen or len(chosen) < len(wanted):
        print(__doc__ + "\ntargets: " + ", ".join(name_of(t) for t in TARGETS))
        return 2
    os.environ.update({"SANLAB_ICOUNT": str(SHIFT), "SANLAB_ACCEL": "tcg"})
    image = prof.profiling_image(require_image("debian-12"))
    loaded = parse_scenario(scenario(chosen), "path_lengths")
    lab = Lab(loaded, "paths", new_run_dir("paths"))
    t0 = time.monotonic()
    DEADLINE[0] = t0 + BUDGET_S
    if os.environ.get("PATHS_STOP_AT"):  # a wall-clock end (UTC epoch seconds) for this run's cells
        DEADLINE[0] = min(DEADLINE[0], t0 + float(os.environ["PATHS_STOP_AT"]) - time.time())
    try:
        lab.up(say, image=image)
        kernel = must(lab.vms["initiator"], "uname -r").strip()
        say(f"lab up in {time.monotonic() - t0:.0f} s; kernel {kernel}")
        count = run_lab(lab, chosen, quick, again)
    finally:
        lab.down()
    say(f"done in {time.monotonic() - t0:.0f} s; {count} cells into {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Instructions per I/O of the code sanlab runs (issue #46, item 2): models/data/path-lengths.csv.

    flock /tmp/sanlab-vm.lock .venv/bin/python benchmarks/path_lengths.py LAB[:TRANSPORT,...] [--quick]

LAB is ``tcp`` (iscsi on LIO, nvme-tcp on nvmet, over a plain link), ``rxe`` (iser and srp on
LIO, nvme-rdma on nvmet, over Soft-RoCE) or ``siw`` (iser on tgt, nvme-rdma on nvmet, over
soft-iWARP).  One lab per call, so the VM lock is held for one lab at a time.

Method (models/data/path-lengths.README.md says why, and what it costs in accuracy): both
guests run under QEMU's ``-icount shift=S`` (emulator/qemu.py's $SANLAB_ICOUNT), so their
clocks advance 2**S ns per instruction executed; ``perf record -e cpu-clock -c P -a`` in each
guest then takes one sample per P/2**S instructions executed.  A loop of known length
calibrates what a sample is worth.  Each cell (rw, bs, QD) runs twice, with N/4 and N I/Os:
the difference cancels what both runs share (fio's start, perf's start).  Samples the halted
CPU takes are dropped, and so is, per halted sample, what the idle guests do (measured first:
background and the profiler's own wake-ups).  Samples go to groups by
models/data/path-groups.yaml.  Rows of the measured cells replace those in the CSV.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import path_profile as prof  # noqa: E402

from sanlab.emulator.images import require_image  # noqa: E402
from sanlab.emulator.lab import Lab  # noqa: E402
from sanlab.emulator.lab_state import new_run_dir  # noqa: E402
from sanlab.emulator.qemu import Vm  # noqa: E402
from sanlab.models.paths import GROUPS, host_groups, write_rows  # noqa: E402
from sanlab.scenarios.loader import parse_scenario  # noqa: E402
from sanlab.targets.placement import place  # noqa: E402
from sanlab.targets.stacks import exported  # noqa: E402

SHIFT = 3  # 8 ns of guest time per instruction: about the speed TCG runs at here
WORTH = 50_000  # instructions per sample, nominal
PERIOD_NS = WORTH << SHIFT
PERF = f"LD_LIBRARY_PATH={prof.GUEST_DIR}/lib {prof.GUEST_DIR}/perf"
REPORT = "report -n -t '|' --sort comm,dso,sym -q --percent-limit 0 --stdio"
LABS = {
    "tcp": ({"fabric": "eth"}, [("iscsi", "lio"), ("nvme-tcp", "nvmet")], "none"),
    "rxe": ({"fabric": "roce", "rdma_driver": "rxe"},
            [("iser", "lio"), ("srp", "lio"), ("nvme-rdma", "nvmet")], "rxe"),
    "siw": ({"fabric": "iwarp", "rdma_driver": "siw"}, [("iser", "tgt"), ("nvme-rdma", "nvmet")], "siw"),
}  # fmt: skip
CELLS = [(rw, bs, qd) for rw in ("randread", "randwrite") for bs in (4096, 65536) for qd in (1, 32)]
OUT = prof.ROOT / "models" / "data" / "path-lengths.csv"
# No cell starts after this (time.monotonic()): one lab holds the shared VM lock 25 min at most.
DEADLINE = [float("inf")]
BUDGET_S = 21 * 60
RAW = prof.ROOT / "models" / "data" / "path-lengths.runs.jsonl"


def say(line: str) -> None:
    print(f"{datetime.datetime.now(datetime.UTC):%H:%M:%S} {line}", flush=True)


def scenario(lab: str, chosen: list[tuple[str, str]]) -> dict[str, object]:
    link, _, _ = LABS[lab]
    return {
        "description": f"path lengths over {lab}",
        "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
        "links": [{"name": "wire", "endpoints": ["initiator", "target"], "mtu": 1500, **link}],
        "targets": [
            {"name": t, "host": "target", "transport": t, "stack": s, "backstore": "ramdisk", "size": "64m"}
            for t, s in chosen
        ],
        "workloads": [{"rw": "randread", "bs": "4k", "iodepth": 1, "runtime": "1s"}],
    }


def must(vm: Vm, command: str, timeout: float = 600) -> str:
    done = vm.run(command, timeout=timeout)
    if done.rc != 0:
        raise SystemExit(f"{vm.name}: {command[:80]}: rc {done.rc}: {done.stderr[-400:]}")
    return done.stdout


def report(vm: Vm, data: str) -> list[tuple[str, str, str, int]]:
    return prof.parse_report(must(vm, f"{PERF} {REPORT} -i {data} 2>/dev/null", 900))


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
PACKETS = "cat /sys/class/net/wire/statistics/tx_packets /sys/class/net/wire/statistics/rx_packets"


def frames(vm: Vm) -> int:
    """Frames the initiator's link NIC has sent and received: both directions of the wire."""
    return sum(int(x) for x in must(vm, PACKETS).split())


def one_run(ini: Vm, tgt: Vm, command: str, mapping: prof.Mapping) -> Run:
    """Both guests profiled while ``command`` runs on the initiator: (initiator's groups,
    target's groups, I/Os fio completed, frames on the wire)."""
    must(tgt, "rm -f /tmp/t.data")
    pid = tgt.spawn(f"exec {PERF} record -q -e cpu-clock -c {PERIOD_NS} -a -o /tmp/t.data", "/tmp/t.log")
    must(tgt, "for i in $(seq 100); do [ -s /tmp/t.data ] && break; sleep 0.1; done; sleep 0.5")
    before = frames(ini)
    must(ini, f"{PERF} record -q -e cpu-clock -c {PERIOD_NS} -a -o /tmp/i.data -- {command}", 1800)
    wire = frames(ini) - before
    must(tgt, f"kill -INT {pid}; while kill -0 {pid} 2>/dev/null; do sleep 0.2; done")
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


def measure_target(lab: Lab, transport: str, stack: str, provider: str, quick: bool, worth: float,
                   mapping: prof.Mapping) -> list[dict[str, object]]:  # fmt: skip
    """Every cell of one target: exported once, idle baseline, then two runs per cell."""
    target = next(t for t in lab.scenario.targets if t.name == transport)
    wire = place(lab.scenario, target, lab.vms, lab.blueprint.endpoints).wiring
    ini, tgt = lab.vms["initiator"], lab.vms["target"]
    rows: list[dict[str, object]] = []
    with exported(target, transport, wire, say) as devices:
        dev = devices[0]
        rates = idle(ini, tgt, mapping)
        say(f"{transport}: exported as {dev}; idle background per halted sample: "
            f"initiator {sum(rates[0].values()):.3f}, target {sum(rates[1].values()):.3f}")  # fmt: skip
        for rw, bs, qd in CELLS[:2] if quick else CELLS:
            if time.monotonic() > DEADLINE[0]:
                say(
                    f"{transport}: out of this lock's time; {rw} {bs // 1024}k QD{qd} and later cells not run"
                )
                break
            n = (4000 if bs == 4096 else 1500) // (4 if quick else 1)
            started = time.monotonic()
            runs = (one_run(ini, tgt, fio(dev, rw, bs, qd, n // 4), mapping),
                    one_run(ini, tgt, fio(dev, rw, bs, qd, n), mapping))  # fmt: skip
            key: dict[str, object] = {"transport": transport, "stack": stack, "provider": provider}
            key |= {"rw": rw, "bs": bs, "iodepth": qd}
            cell = cell_rows(key, runs, rates, worth)
            rows += cell
            write_rows(OUT, cell)
            with RAW.open("a") as raw:
                raw.write(json.dumps(key | {"short": runs[0], "long": runs[1], "idle": rates, "worth": worth,
                                            "at": _stamp()}) + "\n")  # fmt: skip
            mine = host_groups(transport)
            totals = [
                sum(
                    float(str(r["instructions_per_io"]))
                    for r in cell
                    if (r["side"], r["group"] in mine) == (s, True)
                )
                for s in ("initiator", "target")
            ]
            say(f"{transport} {rw} {bs // 1024}k QD{qd}: {cell[0]['ios']} I/Os; host cost "
                f"initiator {totals[0] / 1e3:.1f} k, target {totals[1] / 1e3:.1f} k instructions/I/O "
                f"({time.monotonic() - started:.0f} s)")  # fmt: skip
    return rows


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    global OUT, RAW
    if quick:  # a check of the pipeline: its figures never reach models/data
        OUT, RAW = Path("/tmp/path-lengths-quick.csv"), Path("/tmp/path-lengths-quick.runs.jsonl")
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1 or args[0].split(":")[0] not in LABS:
        print(__doc__)
        return 2
    lab_key, _, only = args[0].partition(":")
    chosen = [(t, s) for t, s in LABS[lab_key][1] if not only or t in only.split(",")]
    os.environ.update({"SANLAB_ICOUNT": str(SHIFT), "SANLAB_ACCEL": "tcg"})
    image = prof.profiling_image(require_image("debian-12"))
    mapping = prof.Mapping.load()
    loaded = parse_scenario(scenario(lab_key, chosen), f"path_lengths {lab_key}")
    name = f"paths-{lab_key}"
    lab = Lab(loaded, name, new_run_dir(name))
    t0 = time.monotonic()
    DEADLINE[0] = t0 + BUDGET_S
    rows: list[dict[str, object]] = []
    try:
        lab.up(say, image=image)
        kernel = must(lab.vms["initiator"], "uname -r").strip()
        say(f"lab up in {time.monotonic() - t0:.0f} s; kernel {kernel}")
        for vm in lab.vms.values():
            prepare(vm)
        cal = calibrate(lab.vms["initiator"], mapping)
        say(f"calibration: a sample is worth {cal['worth']:.0f} instructions (nominal {WORTH}, "
            f"{cal['spin_samples']} samples); a 64 KiB rep movsb counts {cal['movsb_64k']:.0f}")  # fmt: skip
        with RAW.open("a") as raw:
            facts = {
                "calibration": cal,
                "lab": lab_key,
                "shift": SHIFT,
                "period_ns": PERIOD_NS,
                "at": _stamp(),
            }
            raw.write(json.dumps(facts) + "\n")
        for t, s in chosen:
            rows += measure_target(lab, t, s, LABS[lab_key][2], quick, cal["worth"], mapping)
    finally:
        lab.down()
    say(f"done in {time.monotonic() - t0:.0f} s; {len(rows)} rows into {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

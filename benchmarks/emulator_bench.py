"""Emulator figures: boot-to-ready per VM, and RDMA WRITE bandwidth and latency
over rxe and siw between two VMs (perftest's ib_write_bw / ib_write_lat over
RDMA/CM).  These are the speed of software emulation on this machine, not of
any hardware.

    python benchmarks/emulator_bench.py [--drivers rxe siw]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import time

from sanlab.emulator.images import build_image
from sanlab.emulator.lab import running_lab
from sanlab.scenarios.loader import load_scenario


def perftest(lab, driver: str, tool: str, args: str) -> str:  # type: ignore[no-untyped-def]
    target, initiator = lab.vms["target"], lab.vms["initiator"]
    ip = lab.blueprint.addresses[("fabric", "target")]
    device = f"{driver}_fabric"
    target.spawn(f"{tool} -R -d {device} {args}", log=f"/tmp/{tool}.log")
    time.sleep(2)
    return initiator.run(f"{tool} -R -d {device} {args} {ip}", timeout=300).check().stdout


def last_row(output: str) -> list[float]:
    rows = [line.split() for line in output.splitlines() if re.match(r"^\s*\d+\s+\d+", line)]
    return [float(x) for x in rows[-1]]


def bench(driver: str) -> dict[str, float]:
    scenario = load_scenario(f"scenarios/pair-{driver}.yaml")
    started = time.monotonic()
    with running_lab(scenario, f"bench-{driver}", print) as lab:
        up = time.monotonic() - started
        boots = [vm.boot_seconds or 0.0 for vm in lab.vms.values()]
        bw = last_row(perftest(lab, driver, "ib_write_bw", "-s 65536 -n 2000 --report_gbits"))
        lat = last_row(perftest(lab, driver, "ib_write_lat", "-s 64 -n 1000"))
    # ib_write_bw rows: bytes, iterations, BW peak, BW average, msg rate
    # ib_write_lat rows: bytes, iterations, min, max, typical, average, ...
    return {
        "boot_to_ready_s_max": round(max(boots), 1),
        "lab_up_s": round(up, 1),
        "write_bw_64k_gbps": bw[3],
        "write_lat_64b_typical_us": lat[4],
        "write_lat_64b_avg_us": lat[5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--drivers", nargs="+", default=["rxe", "siw"])
    args = parser.parse_args()
    build_image(print)
    results = {d: bench(d) for d in args.drivers}
    print(
        json.dumps(
            {
                "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

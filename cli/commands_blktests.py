"""``sanlab blktests``: upstream blktests' results, as its ``check`` script wrote them."""

from __future__ import annotations

import json
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

import click

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.blktests import check_checkout, counts, read_results
from sanlab.targets.sessions import blktests_session as session
from sanlab.validation import fail


@click.group()
def blktests() -> None:
    """Upstream blktests (github.com/osandov/blktests): give a checkout, never a copy in sanlab.

    \b
    Example:
      sanlab blktests results ~/blktests/results
    """


@blktests.command()
@click.argument("results_dir", type=click.Path(path_type=Path), required=False)
@click.option(
    "--blktests",
    "checkout",
    type=click.Path(path_type=Path),
    help="A blktests checkout: read its results/ folder.",
)
@click.option("--json", "as_json", is_flag=True, help="Print {'results': [...], 'counts': {...}} only.")
def results(results_dir: Path | None, checkout: Path | None, as_json: bool) -> None:
    """Read blktests' RESULTS_DIR (results/<dev>/<group>/<NNN>): each test's status, reason,
    runtime and the files kept beside it; exit 1 when any test failed.

    \b
    Example:
      sanlab blktests results ~/blktests/results
      sanlab blktests results --blktests ~/blktests --json
    """
    try:
        if checkout is not None and results_dir is None:
            root, option = check_checkout(checkout) / "results", "--blktests"
        elif results_dir is not None and checkout is None:
            root, option = results_dir, "RESULTS_DIR"
        else:
            raise SanlabError("give RESULTS_DIR or --blktests CHECKOUT (one of them)")
        found = read_results(root, option)
    except SanlabError as exc:
        fail(exc)
    tally = counts(found)
    if as_json:
        click.echo(json.dumps({"results": [asdict(r) for r in found], "counts": tally}, indent=2))
    else:
        click.echo(f"{'test':<12} {'device / condition':<28} {'status':<8} {'reason':<7} {'runtime':>9}")
        for r in found:
            runtime = f"{r.runtime_s:.3f}s" if r.runtime_s is not None else "-"
            click.echo(f"{r.test:<12} {r.device:<28} {r.status:<8} {r.reason or '-':<7} {runtime:>9}")
            for name in r.evidence:
                click.echo(f"{'':<12} kept: {root / r.device / r.test.split('/')[0] / name}")
        click.echo(", ".join(f"{n} {status}" for status, n in tally.items()) + f" ({len(found)} results)")
    sys.exit(1 if tally["fail"] else 0)


@blktests.command("run")
@click.argument("wire")
@click.option(
    "--blktests",
    "checkout",
    type=click.Path(path_type=Path),
    required=True,
    help="A blktests checkout (git clone https://github.com/osandov/blktests); copied into the guests.",
)
@click.option("--group", default="nvme", show_default=True, help="nvme (across the wire) or srp (rxe only).")
@click.option("--tests", "tests", multiple=True, help="Run only these tests (nvme/003; repeat the option).")
@click.option("--timeout", "timeout_s", type=int, default=600, show_default=True, help="Seconds per test.")
@click.option(
    "--out", type=click.Path(path_type=Path), help="Run folder (default: runs/blktests-WIRE-GROUP-TIME)."
)
@click.option("--force", is_flag=True, help="Replace a previous sanlab run in --out (its manifest's files).")
@click.option("--no-capture", is_flag=True, help="Do not capture the cable (a pcap of 256-byte frames).")
def run(
    wire: str,
    checkout: Path,
    group: str,
    tests: tuple[str, ...],
    timeout_s: int,
    out: Path | None,
    force: bool,
    no_capture: bool,
) -> None:
    """Run upstream blktests' GROUP in two guests joined by one WIRE (rxe, siw or tcp): the
    nvme group with its target in the other guest (NVME_TARGET_CONTROL), the srp group in one
    guest over rxe; blktests' results, each test's console output, both guests' logs and the
    capture go into the run folder; exit 1 when any test failed or timed out.

    \b
    Example:
      sanlab blktests run rxe --blktests ~/blktests --tests nvme/003 --tests nvme/010
      sanlab blktests run rxe --blktests ~/blktests --group srp
    """
    folder = out or Path("runs") / f"blktests-{wire[:20]}-{group[:20]}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        planned = session.plan(wire, group, checkout, tests, timeout_s)
        signal.signal(signal.SIGTERM, _interrupt)  # a kill tears the guests down as Ctrl-C does
        summary = session.run(planned, folder, force, _say, capture=not no_capture)
    except SanlabError as exc:
        fail(exc)
    except KeyboardInterrupt:
        click.echo(f"interrupted: the tests that ended are kept in {folder} ({session.SUMMARY})", err=True)
        sys.exit(130)
    tally = summary["counts"]
    reasons = "; ".join(f"{n} x {reason}" for reason, n in summary["skip_reasons"].items())
    click.echo(
        f"{folder}: "
        + ", ".join(f"{n} {status}" for status, n in tally.items())
        + f" in {summary['wall_s']:.0f} s"
    )
    if reasons:
        click.echo(f"not run: {reasons}")
    if summary["timed_out"]:
        click.echo(f"timed out: {', '.join(summary['timed_out'])}")
    sys.exit(1 if tally["fail"] or summary["timed_out"] else 0)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _say(message: str) -> None:
    click.echo(f"{time.strftime('%H:%M:%S')} {message}", err=True)

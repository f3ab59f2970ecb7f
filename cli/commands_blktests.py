"""``sanlab blktests``: upstream blktests' results, as its ``check`` script wrote them."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.results.blktests import check_checkout, counts, read_results
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

"""Charts drop empty panels: a panel shows a comparison, never one lonely bar.

StarWind's table tunes jobs and depth per set-up, so its chart drew 18
panels, 15 with one bar.  Panels are keyed on size, kind and QD 1 or depth,
and each bar says its own jobs and depth.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sanlab.main import cli
from sanlab.models import report
from sanlab.scenarios.records import ResultRecord
from support import REPO


@pytest.mark.slow  # seconds of projecting
def test_the_starwind_chart_has_no_panel_of_one_bar(tmp_path, monkeypatch):
    out = tmp_path / "report"
    run = CliRunner().invoke(
        cli, ["model", str(REPO / "scenarios" / "starwind-2024.yaml"), "--report", str(out)]
    )
    assert run.exit_code == 0, run.output
    assert (out / "chart.png").stat().st_size > 20_000
    records = [
        ResultRecord.model_validate(r) for r in json.loads((out / "results.json").read_text())["results"]
    ]
    cells = [report.Cell(r.transport, r, None) for r in records]
    panels: list[list[report.Cell]] = []
    drawn = report._facet
    monkeypatch.setattr(report, "_facet", lambda ax, c, *rest: (panels.append(list(c)), drawn(ax, c, *rest)))
    report.chart_png(cells, "starwind")
    assert sum(len(p) for p in panels) == len(cells) == 24
    assert len(panels) == 8 and all(len(p) >= 2 for p in panels), [len(p) for p in panels]
    for panel in panels:  # one size and kind a panel
        assert len({(c.record.bs, c.record.rw) for c in panel}) == 1

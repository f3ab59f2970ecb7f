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
from sanlab.models.core import report
from sanlab.scenarios.results.records import ResultRecord
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


def _pareto_figure(monkeypatch, rows, front, goals):
    """Draw the sweep's chart and keep the Matplotlib figure to look into."""
    from sanlab.models.sweeps import sweep_goals
    from sanlab.scenarios import writing

    kept = []
    real = writing.figure_bytes
    monkeypatch.setattr(writing, "figure_bytes", lambda fig, **kw: (kept.append(fig), real(fig, **kw))[1])
    objectives = {"iops": "max", "link_gbps": "min", "cores": "min"}
    png = sweep_goals.pareto_chart(rows, front, objectives, [sweep_goals.parse_goal(g) for g in goals])
    assert png.startswith(b"\x89PNG")
    return kept[0]


def test_the_pareto_chart_shows_every_objective_the_goal_and_fades_the_rest(monkeypatch):
    from sanlab.models.sweeps.sweep_goals import meeting, pareto_front

    rows = [
        {
            "transport": t,
            "iops": iops * (1 + depth / 100),
            "link_gbps": link,
            "cores": cores,
            "iodepth": depth,
        }
        for t, iops in (("iscsi", 0.4e6), ("nvme-rdma", 1.0e6))
        for link in (25, 100)
        for cores in (8, 32)
        for depth in (16, 32)
    ]
    for row in rows:
        row["iops"] *= row["link_gbps"] / 25 * (row["cores"] / 8) ** 0.5
    front = pareto_front(meeting(rows, []), {"iops": "max", "link_gbps": "min", "cores": "min"})
    fig = _pareto_figure(monkeypatch, rows, front, ["iops >= 2e6"])
    panels = [ax for ax in fig.axes if ax.collections]
    assert [ax.get_xlabel().split(",")[0] for ax in panels] == ["link gbps", "cores"]
    for ax in panels:
        assert any(list(line.get_ydata()) == [2e6, 2e6] for line in ax.lines), "no goal line at 2 M"
        pale, *coloured = ax.collections
        xs = {tuple(o) for o in pale.get_offsets()}
        assert len(xs) == len(pale.get_offsets())  # one dot a position: never darkened by overlap
        assert all(c == pale.get_facecolor()[0][0] for c in pale.get_facecolor()[0][:3])  # grey
        assert sum(len(c.get_offsets()) for c in coloured) == len(front)

"""Set projections beside published measurements: text, CSV and PNG charts.

The published values come from models/data/published (read by ``published``);
this module only matches rows by their workload point and does arithmetic.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sanlab.models.metrics import mape
from sanlab.models.published import Measured
from sanlab.scenarios.records import ResultRecord
from sanlab.scenarios.sizes import format_size
from sanlab.scenarios.writing import figure_bytes


@dataclass(frozen=True)
class Cell:
    label: str
    record: ResultRecord
    measured: Measured | None

    @property
    def iops_error(self) -> float | None:
        if self.measured is None or self.record.iops is None:
            return None
        return self.record.iops / self.measured.iops - 1

    @property
    def latency_error(self) -> float | None:
        m = self.measured
        if m is None or m.lat_mean_us is None or self.record.lat_mean_us is None:
            return None
        return self.record.lat_mean_us / m.lat_mean_us - 1


def _key(transport: str, fabric: str, gbps: float | None, rw: str, bs: int, qd: int, nj: int) -> tuple:
    return (transport, fabric, round(gbps, 2) if gbps is not None else None, rw, bs, qd, nj)


def match(labelled: Sequence[tuple[str, ResultRecord]], table: Sequence[Measured]) -> list[Cell]:
    """Pair each projected record with the published row of the same point."""
    index = {
        _key(
            m.point.transport,
            m.point.fabric,
            m.point.link_gbps,
            m.point.rw,
            m.point.bs,
            m.point.iodepth,
            m.point.numjobs,
        ): m
        for m in table
    }
    cells = []
    for label, r in labelled:
        key = _key(r.transport, r.fabric, r.link_gbps, r.rw, r.bs, r.iodepth, r.numjobs)
        cells.append(Cell(label, r, index.get(key)))
    return cells


def text_table(cells: Sequence[Cell], title: str) -> str:
    """A fixed-width table a terminal and a README can both show: only columns with data, and a
    legend under it for what is not self-evident."""
    compare = any(c.measured for c in cells)
    latency = compare and any(c.latency_error is not None for c in cells)
    cpu = any(c.record.cpu_initiator_pct is not None or c.record.cpu_target_pct is not None for c in cells)
    head = (
        f"{'set-up':<22} {'rw':<9} {'bs':>4} {'jobs':>4} {'qd':>3} {'IOPS':>10} {'MiB/s':>8} "
        f"{'lat us':>8} {'p99 us':>8} {'bottleneck':<14} {'IOPS 95% range':>17}"
    )
    head += f" {'cpu ini':>7} {'cpu tgt':>7}" if cpu else ""
    head += f" {'published':>10} {'err':>7}" if compare else ""
    head += f" {'lat err':>8}" if latency else ""
    out = io.StringIO()
    out.write(f"{title}\n{head}\n{'-' * len(head)}\n")
    for c in cells:
        out.write(_row(c, cpu, compare, latency) + "\n")
    for c in cells:
        if c.record.note:
            out.write(f"note, {c.label}: {c.record.note}\n")
    out.write(_legend(cpu, compare))
    if compare:
        out.write(_summary(cells))
    return out.getvalue()


def _row(c: Cell, cpu: bool, compare: bool, latency: bool) -> str:
    r = c.record
    line = (
        f"{c.label[:22]:<22} {r.rw:<9} {format_size(r.bs):>4} {r.numjobs:>4} {r.iodepth:>3} "
        f"{r.iops or 0:>10,.0f} {r.bw_mibps or 0:>8,.0f} {r.lat_mean_us or 0:>8.1f} "
        f"{r.lat_p99_us or 0:>8.1f} {r.bottleneck or '':<14} {_range(r.iops_range95):>17}"
    )
    if cpu:
        line += f" {_percent(r.cpu_initiator_pct):>7} {_percent(r.cpu_target_pct):>7}"
    if compare:
        error = f"{100 * c.iops_error:+.1f}%" if c.measured and c.iops_error is not None else "-"
        line += f" {f'{c.measured.iops:,.0f}' if c.measured else '-':>10} {error:>7}"
    if latency:
        lat = c.latency_error
        line += f" {f'{100 * lat:+.1f}%' if lat is not None else '-':>8}"
    return line


def _percent(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def _legend(cpu: bool, compare: bool) -> str:
    parts = [
        "IOPS 95% range: what the fitted parameters leave open and the model's own error"
        " (models/README: how often published cells fall inside)"
    ]
    if cpu:
        parts.append("cpu ini/tgt: the initiator's and target's CPU busy, % of all their cores")
    if compare:
        parts.append("err: (model - published) / published, + where the model is higher")
    return "".join(f"  {p}\n" for p in parts)


def _summary(cells: Sequence[Cell]) -> str:
    iops = mape([c.iops_error for c in cells])
    lat = mape([c.latency_error for c in cells])
    matched = sum(1 for c in cells if c.measured)
    summary = f"{matched} cells matched a published value; IOPS MAPE {iops:.1f}%"
    if lat is not None:
        summary += f"; mean-latency MAPE {lat:.1f}%"
    return summary + "\n"


def _short(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e3 else f"{n:.0f}"


def _range(spread: tuple[float, float] | None) -> str:
    """'92k-766k': the IOPS range the calibration leaves open; one figure where both ends print
    alike (a fit written before the model's own error was measured), '-' where it is not known."""
    if not spread:
        return "-"
    low, high = _short(spread[0]), _short(spread[1])
    return low if low == high else f"{low}-{high}"


def csv_text(cells: Sequence[Cell]) -> str:
    """The cells as CSV, for the report folder's writer (scenarios/writing.py)."""
    handle = io.StringIO(newline="")
    writer = csv.writer(handle)
    writer.writerow(
        [
            "setup",
            "transport",
            "fabric",
            "link_gbps",
            "rw",
            "bs",
            "numjobs",
            "iodepth",
            "iops",
            "iops_ci_low",
            "iops_ci_high",
            "iops_params_low",
            "iops_params_high",
            "bw_mibps",
            "lat_mean_us",
            "lat_p99_us",
            "cpu_target_pct",
            "cpu_initiator_pct",
            "bottleneck",
            "bound_iops",
            "published_iops",
            "iops_error_pct",
            "published_lat_us",
            "lat_error_pct",
        ]
    )
    for c in cells:
        r, m = c.record, c.measured
        ci = r.iops_ci95 or (None, None)
        spread = r.iops_range95 or (None, None)
        err, lat_err = c.iops_error, c.latency_error
        writer.writerow(
            [
                c.label,
                r.transport,
                r.fabric,
                r.link_gbps,
                r.rw,
                r.bs,
                r.numjobs,
                r.iodepth,
                r.iops,
                ci[0],
                ci[1],
                spread[0],
                spread[1],
                r.bw_mibps,
                r.lat_mean_us,
                r.lat_p99_us,
                r.cpu_target_pct,
                r.cpu_initiator_pct,
                r.bottleneck,
                r.bound,
                m.iops if m else "",
                f"{100 * err:.2f}" if err is not None else "",
                m.lat_mean_us if m and m.lat_mean_us else "",
                f"{100 * lat_err:.2f}" if lat_err is not None else "",
            ]
        )
    return handle.getvalue()


KIND_WORDS = {"randread": "random read", "randwrite": "random write", "read": "read", "write": "write"}


def workload_words(record: ResultRecord) -> str:
    """'4 KiB random read, 1 job, QD 32': a workload as a person says it, for charts."""
    size = format_size(record.bs).replace("k", " KiB").replace("m", " MiB")
    jobs = f"{record.numjobs} job{'s' if record.numjobs != 1 else ''}"
    return f"{size} {KIND_WORDS.get(record.rw, record.rw)}, {jobs}, QD {record.iodepth}"


def chart_png(cells: Sequence[Cell], title: str) -> bytes:
    """One small chart per workload: projected IOPS per set-up as bars from zero, the range the
    fitted parameters leave open as whiskers, published values as black dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(workload_words(c.record) for c in cells))
    setups = list(dict.fromkeys(c.label for c in cells))
    columns = min(3, len(workloads))
    rows = -(-len(workloads) // columns)
    tallest = max(len({c.label for c in cells if workload_words(c.record) == w}) for w in workloads)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4.2 * columns, rows * (0.45 * tallest + 1.3) + 0.8), squeeze=False
    )
    colours = plt.get_cmap("tab10")
    for ax, workload in zip(axes.flat, workloads, strict=False):
        _facet(ax, [c for c in cells if workload_words(c.record) == workload], setups, colours, tallest)
        ax.set_title(workload, fontsize=9)
    for ax in list(axes.flat)[len(workloads) :]:
        ax.set_visible(False)
    legend = "bars: projected IOPS; whiskers: the 95 % range the fitted parameters leave open"
    legend += "; dots: published" if any(c.measured for c in cells) else ""
    fig.suptitle(f"{title}\n{legend}", fontsize=10)
    fig.tight_layout()
    data = figure_bytes(fig, format="png", dpi=110)
    plt.close(fig)
    return data


def _facet(ax: Any, cells: Sequence[Cell], setups: Sequence[str], colours: Any, rows: int) -> None:
    """Horizontal bars, one per set-up that ran this workload, on a linear axis from zero
    (lengths compare honestly); a set-up keeps its colour in every facet."""
    shown = [name for name in setups if any(c.label == name for c in cells)]
    for c in cells:
        y = shown.index(c.label)
        iops = c.record.iops or 0
        ax.barh(y, iops, color=colours(setups.index(c.label) % 10), height=0.7)
        if c.record.iops_range95:
            low, high = c.record.iops_range95
            ax.errorbar(
                iops,
                y,
                xerr=[[max(0.0, iops - low)], [max(0.0, high - iops)]],
                fmt="none",
                ecolor="0.25",
                capsize=3,
                linewidth=1,
            )
        if c.measured:
            ax.plot(c.measured.iops, y, "o", color="black", markersize=4, zorder=3)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(shown, fontsize=8)
    ax.set_ylim(rows - 0.5, -0.5)  # every facet's bars as thick as the fullest one's
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(_thousands())
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("IOPS", fontsize=8)
    ax.grid(axis="x", alpha=0.3)


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: _short(value) if value else "0")

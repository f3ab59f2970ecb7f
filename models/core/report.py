"""Set projections beside published measurements: text, CSV and PNG charts.

The published values come from models/data/published (read by ``published``);
this module only matches rows by their workload point and does arithmetic.
"""

from __future__ import annotations

import csv
import io
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sanlab.models.core.metrics import mape
from sanlab.models.core.published import Measured
from sanlab.scenarios.results.records import ResultRecord
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


WIDTH = 120  # the default table fits a 120-column terminal; --wide shows every column


def text_table(cells: Sequence[Cell], title: str, wide: bool = False) -> str:
    """A fixed-width table a terminal and a README can both show: the assumed hardware named
    above it, only columns with data, and a legend under it that explains every column.

    By default it fits ``WIDTH`` columns (CPU as one 'ini/tgt' column, no MiB/s,
    p99 or latency error); ``wide`` shows all of them."""
    compare = any(c.measured for c in cells)
    latency = wide and compare and any(c.latency_error is not None for c in cells)
    cpu = any(c.record.cpu_initiator_pct is not None or c.record.cpu_target_pct is not None for c in cells)
    label = 22 if wide else max(6, min(22, max((len(c.label) for c in cells), default=6)))
    head = f"{'set-up':<{label}} {'rw':<9} {'bs':>4} {'jobs':>4} {'qd':>3} {'IOPS':>9}"
    if wide:
        head += f" {'MiB/s':>8} {'lat us':>8} {'p99 us':>8} {'bottleneck':<14} {'regime':<12}"
        head += f" {'IOPS 95% range':>17}"
        head += f" {'cpu ini':>7} {'cpu tgt':>7}" if cpu else ""
    else:
        head += f" {'lat us':>7}" + (f" {'cpu i/t%':>8}" if cpu else "")
        head += f" {'bottleneck':<14}   {'95% range':>11}"
    head += f" {'published':>10} {'err':>7}" if compare else ""
    head += f" {'lat err':>8}" if latency else ""
    out = io.StringIO()
    out.write("".join(f"{line}\n" for line in profile_lines(cells)))
    out.write(f"{title}\n{head}\n{'-' * len(head)}\n")
    for c in cells:
        out.write(_row(c, label, wide, cpu, compare, latency) + "\n")
    for c in cells:
        if c.record.note:
            note = textwrap.wrap(f"note, {c.label}: {c.record.note}", WIDTH, subsequent_indent="  ")
            out.write("".join(f"{line}\n" for line in note))
    out.write(_legend(wide, cpu, compare, latency))
    if compare:
        out.write(_summary(cells))
    return out.getvalue()


def profile_lines(cells: Sequence[Cell]) -> list[str]:
    """'profile modern-100g: 2 x 32 cores @ 2.8 GHz, MTU 9000, nvmet': the hardware each
    profile stands for, as the records' machine facts say (with --cores, the cores used)."""
    lines = []
    for name in dict.fromkeys(c.record.profile for c in cells if c.record.profile):
        records = [c.record for c in cells if c.record.profile == name]
        hosts = list(dict.fromkeys(_hosts(r) for r in records if r.machine))
        mtus = "/".join(str(m) for m in sorted({r.mtu for r in records}))
        stacks = ", ".join(dict.fromkeys(r.target_stack for r in records))
        lines.append(f"profile {name}: {'; '.join(hosts) or 'hosts not named'}, MTU {mtus}, {stacks}")
    return lines


def _hosts(record: ResultRecord) -> str:
    machine = record.machine
    assert machine is not None
    sides = [(role, getattr(machine, role)) for role in ("initiator", "target")]
    said = [(role, f"{h.cores} cores @ {h.ghz:g} GHz") for role, h in sides if h and h.cores and h.ghz]
    if len(said) == 2 and said[0][1] == said[1][1]:
        return f"2 \u00d7 {said[0][1]}"
    return ", ".join(f"{role} {what}" for role, what in said)


def outside_range(c: Cell) -> bool:
    """A published value the model's 95 % range does not hold: worth a second look."""
    spread = c.record.iops_range95
    return bool(c.measured and spread and not spread[0] <= c.measured.iops <= spread[1])


def _row(c: Cell, label: int, wide: bool, cpu: bool, compare: bool, latency: bool) -> str:
    r = c.record
    line = (
        f"{c.label[:label]:<{label}} {r.rw:<9} {format_size(r.bs):>4} {r.numjobs:>4} {r.iodepth:>3} "
        f"{r.iops or 0:>9,.0f}"
    )
    if wide:
        line += (
            f" {r.bw_mibps or 0:>8,.0f} {r.lat_mean_us or 0:>8.1f} {r.lat_p99_us or 0:>8.1f}"
            f" {r.bottleneck or '':<14} {_regime(r):<12} {_range(r.iops_range95):>17}"
        )
        if cpu:
            line += f" {_percent(r.cpu_initiator_pct):>7} {_percent(r.cpu_target_pct):>7}"
    else:
        line += f" {r.lat_mean_us or 0:>7.1f}"
        if cpu:
            both = f"{_number(r.cpu_initiator_pct)}/{_number(r.cpu_target_pct)}"
            line += f" {both:>8}"
        line += f" {r.bottleneck or '':<14} {_unfitted(r):1} {_range(r.iops_range95):>11}"
    if compare:
        error = f"{100 * c.iops_error:+.1f}%" if c.measured and c.iops_error is not None else "-"
        published = f"{c.measured.iops:,.0f}" + ("!" if outside_range(c) else " ") if c.measured else "- "
        line += f" {published:>10} {error:>7}"
    if latency:
        lat = c.latency_error
        line += f" {f'{100 * lat:+.1f}%' if lat is not None else '-':>8}"
    return line


def _unfitted(record: ResultRecord) -> str:
    """'?' where no row the model was fitted to was bound the way this point is."""
    return "?" if record.regime_fitted is False else ""


def _regime(record: ResultRecord) -> str:
    """'cpu', 'nic-message?': the kind of limit that binds the point, '?' if no fitted row is."""
    return f"{record.regime or '-'}{_unfitted(record)}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{_number(value)}%"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def _legend(wide: bool, cpu: bool, compare: bool, latency: bool) -> str:
    """Every column in a few words, wrapped to the table's width."""
    parts = ["set-up: the projection", "rw bs jobs qd: fio's workload", "IOPS: projected"]
    parts += (
        ["MiB/s: IOPS x bs", "lat us, p99 us: mean and 99th-percentile latency"]
        if wide
        else ["lat us: mean latency"]
    )
    if cpu:
        parts.append(
            f"cpu {'ini, tgt' if wide else 'i/t%'}: initiator's and target's CPU busy, % of all cores"
        )
    parts.append(
        "bottleneck: the resource more than half busy (*-cpu: a host's CPU, *-net: a TCP stack per packet,"
        " link-in/out: the wire into/out of the initiator, device: the drive), else 'latency': too few I/Os"
        " in flight to fill one"
    )
    parts.append(
        "regime: the kind of limit that binds (cpu for *-cpu and *-net, link for the wire, nic-message,"
        " pcie, device, latency)"
        if wide
        else "the regime is the bottleneck's kind (cpu for *-cpu and *-net, link for the wire, nic-message,"
        " pcie, device, latency)"
    )
    parts.append(
        "'?': no row the model was fitted to was bound that way, so its range also spans what the data"
        " leave open"
    )
    parts.append("95% range: the IOPS the fitted parameters and the model's own error leave open")
    if compare:
        parts.append("published: measured IOPS, '!' where outside the 95% range")
        parts.append("err: (model - published) / published")
    if latency:
        parts.append("lat err: the same for mean latency")
    if not wide:
        parts.append("--wide: every column")
    text = "; ".join(parts) + "."
    lines = textwrap.wrap(text, WIDTH, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    return "\n".join(lines) + "\n"


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


CSV_COLUMNS = (
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
    "regime",
    "regime_fitted",
    "bound_iops",
    "published_iops",
    "iops_error_pct",
    "published_lat_us",
    "lat_error_pct",
)


def csv_text(cells: Sequence[Cell]) -> str:
    """The cells as CSV, for the report folder's writer (scenarios/writing.py)."""
    handle = io.StringIO(newline="")
    writer = csv.writer(handle)
    writer.writerow(CSV_COLUMNS)
    writer.writerows(_csv_row(c) for c in cells)
    return handle.getvalue()


def _csv_row(c: Cell) -> list[Any]:
    """One cell's values in ``CSV_COLUMNS`` order; a figure the cell lacks is left empty."""
    r, m = c.record, c.measured
    ci = r.iops_ci95 or (None, None)
    spread = r.iops_range95 or (None, None)
    err, lat_err = c.iops_error, c.latency_error
    return [
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
        r.regime,
        "" if r.regime_fitted is None else str(r.regime_fitted).lower(),
        r.bound,
        m.iops if m else "",
        f"{100 * err:.2f}" if err is not None else "",
        m.lat_mean_us if m and m.lat_mean_us else "",
        f"{100 * lat_err:.2f}" if lat_err is not None else "",
    ]


KIND_WORDS = {"randread": "random read", "randwrite": "random write", "read": "read", "write": "write"}


def workload_words(record: ResultRecord) -> str:
    """'4 KiB random read, 1 job, QD 32': a workload as a person says it, for charts."""
    size = format_size(record.bs).replace("k", " KiB").replace("m", " MiB")
    jobs = f"{record.numjobs} job{'s' if record.numjobs != 1 else ''}"
    return f"{size} {KIND_WORDS.get(record.rw, record.rw)}, {jobs}, QD {record.iodepth}"


def panel_words(record: ResultRecord) -> str:
    """A chart panel's workload: size, kind, and QD 1 or 'at depth'.  Tables tune jobs and depth
    per set-up (StarWind's 4 KiB reads: 32 jobs at QD 32 on iSCSI, 18 at 32 on NVMe/TCP), so
    keyed on the whole workload most panels held one bar; a bar says its own jobs and depth."""
    size = format_size(record.bs).replace("k", " KiB").replace("m", " MiB")
    single = record.iodepth == 1 and record.numjobs == 1
    return f"{size} {KIND_WORDS.get(record.rw, record.rw)}, {'QD 1' if single else 'at depth'}"


def _jobs(n: int) -> str:
    return f"{n} job{'s' if n != 1 else ''}"


def chart_png(cells: Sequence[Cell], title: str) -> bytes:
    """One small chart per workload: projected IOPS per set-up as bars from zero, the range the
    fitted parameters leave open as whiskers, published values as black dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(panel_words(c.record) for c in cells))
    setups = list(dict.fromkeys(c.label for c in cells))
    columns = min(3, len(workloads))
    rows = -(-len(workloads) // columns)
    tallest = max(len([c for c in cells if panel_words(c.record) == w]) for w in workloads)
    fig, axes = plt.subplots(
        rows, columns, figsize=(4.2 * columns, rows * (0.45 * tallest + 1.3) + 0.8), squeeze=False
    )
    colours = plt.get_cmap("tab10")
    for ax, workload in zip(axes.flat, workloads, strict=False):
        _facet(ax, [c for c in cells if panel_words(c.record) == workload], setups, colours, tallest)
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
    mixed = len({(c.record.numjobs, c.record.iodepth) for c in cells}) > 1 or len(shown) < len(cells)
    names = [
        f"{c.label}\n{_jobs(c.record.numjobs)}, QD {c.record.iodepth}" if mixed else c.label for c in cells
    ]
    order = sorted(range(len(cells)), key=lambda i: (setups.index(cells[i].label), names[i]))
    for y, i in enumerate(order):
        c = cells[i]
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
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([names[i] for i in order], fontsize=8)
    ax.set_ylim(rows - 0.5, -0.5)  # every facet's bars as thick as the fullest one's
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(_thousands())
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("IOPS", fontsize=8)
    ax.grid(axis="x", alpha=0.3)


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: _short(value) if value else "0")

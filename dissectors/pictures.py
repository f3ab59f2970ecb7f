"""Pictures of a capture: one I/O as a ladder diagram, and the latency of every I/O.

A ladder (sequence) diagram has the initiator and the target as two
lifelines and every frame of the I/O as an arrow between them, labelled
with what Wireshark says of it and its size, time running down the page.
Long runs of alike frames in one direction (the data of a 1 MiB read) are
drawn as one arrow that says how many frames it stands for, so the picture
stays readable; each arrow's SVG group id names the frames it carries
(``frames-FIRST-LAST-nCOUNT``), and labels stay text in the SVG, so a
program can check the picture as well as a person.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sanlab.dissectors.attribute import Io
from sanlab.dissectors.frames import Frame

# A picture with more arrows than this merges runs of alike frames.
MAX_ARROWS = 40


@dataclass(frozen=True)
class Arrow:
    frames: tuple[Frame, ...]
    outbound: bool  # initiator -> target

    @property
    def label(self) -> str:
        first = self.frames[0]
        size = sum(f.length for f in self.frames)
        text = first.label or "frame"
        if len(self.frames) > 1:
            return f"{len(self.frames)} x {_kind(first)} ({size:,} B)"
        return f"{text[:70]} ({size:,} B)"

    @property
    def gid(self) -> str:
        return f"frames-{self.frames[0].number}-{self.frames[-1].number}-n{len(self.frames)}"


def _kind(frame: Frame) -> str:
    """What a run of frames has in common: the label up to its first detail."""
    return (frame.label or "frame").split(",")[0][:50]


def arrows(io: Io) -> list[Arrow]:
    """One arrow per frame, or per run of alike frames when there are too many to draw."""
    single = [Arrow((f,), f.src == io.initiator) for f in io.frames]
    if len(single) <= MAX_ARROWS:
        return single
    merged: list[Arrow] = []
    for arrow in single:
        last = merged[-1] if merged else None
        frame = arrow.frames[0]
        if last and last.outbound == arrow.outbound and _kind(last.frames[-1]) == _kind(frame):
            merged[-1] = Arrow(last.frames + (frame,), last.outbound)
        else:
            merged.append(arrow)
    return merged


def ladder(io: Io, svg: Path, png: Path | None = None, title: str = "") -> list[Arrow]:
    """Draw ``io`` as a ladder diagram into ``svg`` (and ``png``); returns the arrows drawn."""
    plt = _pyplot()
    drawn = arrows(io)
    start = io.frames[0].time
    height = max(4.0, 0.42 * len(drawn) + 1.5)
    fig, ax = plt.subplots(figsize=(9, height), dpi=100)
    ax.set_xlim(-0.5, 1.5)
    ax.set_ylim(len(drawn) + 0.5, -0.8)
    ax.axis("off")
    target = next((f.dst for f in io.frames if f.src == io.initiator), "")
    for x, name in ((0, f"initiator\n{io.initiator}"), (1, f"target\n{target}")):
        ax.plot([x, x], [-0.2, len(drawn) + 0.3], color="0.4", linewidth=1.2)
        ax.text(x, -0.45, name, ha="center", va="bottom", fontsize=9, fontweight="bold")
    for row, arrow in enumerate(drawn, start=1):
        x0, x1 = (0, 1) if arrow.outbound else (1, 0)
        at_us = (arrow.frames[0].time - start) * 1e6
        group = ax.annotate(
            "",
            xy=(x1, row + 0.15),
            xytext=(x0, row - 0.15),
            arrowprops={"arrowstyle": "->", "color": "tab:blue" if arrow.outbound else "tab:green"},
        )
        group.arrow_patch.set_gid(arrow.gid)
        text = ax.text(0.5, row - 0.12, arrow.label, ha="center", va="bottom", fontsize=7)
        text.set_gid(f"label-{arrow.gid}")
        ax.text(-0.48, row, f"{at_us:,.0f} us", ha="left", va="center", fontsize=6, color="0.3")
    ax.set_title(
        title or f"{io.op} {io.nbytes:,} B, tag {io.tag}: {io.latency_us:,.0f} us on the wire", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(svg, format="svg")
    if png is not None:
        fig.savefig(png, format="png")
    plt.close(fig)
    return drawn


def latency_chart(ios: Sequence[Io], path: Path, title: str = "") -> None:
    """The command-to-response latency of every I/O, one histogram per operation and size."""
    plt = _pyplot()
    groups: dict[str, list[float]] = {}
    for io in ios:
        groups.setdefault(f"{io.op} {io.nbytes:,} B", []).append(io.latency_us)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for name, values in sorted(groups.items()):
        ax.hist(values, bins=min(40, max(5, len(values) // 2)), alpha=0.6, label=f"{name} (n={len(values)})")
    ax.set_xlabel("latency on the wire, command to response (us)")
    ax.set_ylabel("I/Os")
    ax.set_title(title or "latency per operation (from the capture)", fontsize=10)
    if groups:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # labels stay text in the SVG
    import matplotlib.pyplot as plt

    return plt

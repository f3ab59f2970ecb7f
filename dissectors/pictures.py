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

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sanlab.dissectors.attribute import Io
from sanlab.dissectors.frames import Frame
from sanlab.scenarios.writing import figure_bytes, write_file

Save = Callable[[Path, bytes], None]  # how a rendered picture is written (the CLI's manifest)

# A picture with more arrows than this merges runs of alike frames.
MAX_ARROWS = 40
# A label's length before it is cut (between words), and where it wraps onto a second line:
# with the figure 7 inches wide, 9-point text stays legible when the docs shrink it to a phone.
LABEL_CHARS = 96
WRAP_CHARS = 52


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
        return f"{_shortened(text, LABEL_CHARS)} ({size:,} B)"

    @property
    def gid(self) -> str:
        return f"frames-{self.frames[0].number}-{self.frames[-1].number}-n{len(self.frames)}"


def _kind(frame: Frame) -> str:
    """What a run of frames has in common: the label up to its first detail."""
    return _shortened((frame.label or "frame").split(",")[0], 50)


def _shortened(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut between words, never inside one
    ('offset 15' for 15360 read as a wrong number)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = max(cut.rfind(" "), cut.rfind(","))
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,") + "…"


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


def ladder(
    io: Io, svg: Path, png: Path | None = None, title: str = "", save: Save | None = None
) -> list[Arrow]:
    """Draw ``io`` as a ladder diagram into ``svg`` (and ``png``); returns the arrows drawn."""
    plt = _pyplot()
    drawn = arrows(io)
    start = io.frames[0].time
    height = max(4.0, 0.62 * len(drawn) + 1.5)
    fig, ax = plt.subplots(figsize=(7, height), dpi=100)
    ax.set_xlim(-0.5, 1.5)
    ax.set_ylim(len(drawn) + 0.5, -1.1)
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
        label = "\n".join(textwrap.wrap(arrow.label, WRAP_CHARS)[:2])
        text = ax.text(0.5, row - 0.12, label, ha="center", va="bottom", fontsize=9, linespacing=1.0)
        text.set_gid(f"label-{arrow.gid}")
        ax.text(-0.48, row, f"{at_us:,.0f} µs", ha="left", va="center", fontsize=8, color="0.3")
    ax.set_title(
        title or f"{io.op} {io.nbytes:,} B, tag {io.tag}: {io.latency_us:,.0f} µs on the wire", fontsize=10
    )
    fig.tight_layout()
    (save or save_picture)(svg, figure_bytes(fig, format="svg"))
    if png is not None:
        (save or save_picture)(png, figure_bytes(fig, format="png"))
    plt.close(fig)
    return drawn


def latency_chart(ios: Sequence[Io], path: Path, title: str = "", save: Save | None = None) -> None:
    """The command-to-response latency of every I/O as one ECDF per operation and size: each
    curve says what share of I/Os finished within a time, and curves never hide each other."""
    plt = _pyplot()
    groups: dict[str, list[float]] = {}
    for io in ios:
        groups.setdefault(f"{io.op} {io.nbytes:,} B", []).append(io.latency_us)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for name, values in sorted(groups.items()):
        ordered = sorted(values)
        shares = [(i + 1) / len(ordered) for i in range(len(ordered))]
        median, p99 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        label = f"{name}: n={len(ordered)}, median {median:,.0f} µs, p99 {p99:,.0f} µs"
        ax.step(ordered, shares, where="post", linewidth=1.6, label=label)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("latency on the wire, command to response (µs, log scale)")
    ax.set_ylabel("share of I/Os finished")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title or "latency per operation (from the capture)", fontsize=10)
    if groups:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    (save or save_picture)(path, figure_bytes(fig, format=path.suffix.lstrip(".").lower() or "png"))
    plt.close(fig)


def save_picture(path: Path, data: bytes) -> None:
    """Write a picture whole (scenarios/writing.py): a regular file the caller named may be
    replaced; a symlink, folder or device there is refused, never written through."""
    write_file(path, data, exists="regular")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # labels stay text in the SVG
    import matplotlib.pyplot as plt

    return plt

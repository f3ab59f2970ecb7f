"""Pictures of a capture: one I/O as a ladder diagram, and the latency of every I/O.

A ladder (sequence) diagram has the initiator and the target as two
lifelines and every frame of the I/O as an arrow between them, labelled by
what it means to the protocol ("SCSI READ(10) 4 KiB", "R2T", "RDMA WRITE
Middle", "NVMe completion") - from the fields the analyser decoded, never
Wireshark's raw TCP line (Seq=, Ack=, TSval=) - and, unless asked not to,
its size; time runs down the page.  Long runs of alike frames in one
direction (the data of a 1 MiB read) are drawn as one arrow that says how
many frames it stands for, so the picture stays readable; each arrow's SVG
group id names the frames it carries (``frames-FIRST-LAST-nCOUNT``), and
labels stay text in the SVG, so a program can check the picture as well as
a person.  Every picture says it was captured under emulation.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sanlab.dissectors.attribute import Io
from sanlab.dissectors.frames import Command, Frame, Response, Unit
from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.writing import figure_bytes, write_file

Save = Callable[[Path, bytes], None]  # how a rendered picture is written (the CLI's manifest)

# A picture with more arrows than this merges runs of alike frames.
MAX_ARROWS = 40
# A label's length before it is cut (between words), and where it wraps onto a second line:
# the figure is 4.4 inches wide and its labels 10-point, so that a 390-pixel phone, which
# shrinks it to its 360-pixel column, still shows them 11 pixels high.
LABEL_CHARS = 64
WRAP_CHARS = 30
WIDTH_IN, LABEL_PT = 4.4, 10
EMULATED = "emulated: captured between QEMU VMs; not hardware times"


@dataclass(frozen=True)
class Arrow:
    frames: tuple[Frame, ...]
    outbound: bool  # initiator -> target
    meaning: str = "frame"  # what the protocol says the frame is (meaning())
    sizes: bool = True  # label the frames' captured size

    @property
    def label(self) -> str:
        size = sum(f.length for f in self.frames)
        text = _shortened(self.meaning, LABEL_CHARS)
        if len(self.frames) > 1:
            text = f"{len(self.frames)} x {text}"
        return f"{text} ({size:,} B)" if self.sizes else text

    @property
    def gid(self) -> str:
        return f"frames-{self.frames[0].number}-{self.frames[-1].number}-n{len(self.frames)}"


# InfiniBand RC opcodes (BTH) and iWARP RDMAP opcodes, by what they do.
RC_NAMES = {
    0: "SEND First", 1: "SEND Middle", 2: "SEND Last", 3: "SEND Last", 4: "SEND", 5: "SEND",
    6: "RDMA WRITE First", 7: "RDMA WRITE Middle", 8: "RDMA WRITE Last", 9: "RDMA WRITE Last",
    10: "RDMA WRITE", 11: "RDMA WRITE", 12: "RDMA READ request", 13: "RDMA READ response First",
    14: "RDMA READ response Middle", 15: "RDMA READ response Last", 16: "RDMA READ response",
    17: "RC ACK", 22: "SEND Last", 23: "SEND with Invalidate",
}  # fmt: skip
RDMAP_NAMES = {0: "RDMA WRITE", 1: "RDMA READ request", 2: "RDMA READ response", 3: "SEND",
               4: "SEND with Invalidate", 5: "SEND", 6: "SEND with Invalidate", 7: "Terminate"}  # fmt: skip
# What Wireshark's Info column says of an iSCSI or NVMe/TCP PDU, in the protocol's own words.
TCP_PDUS = [
    (re.compile(r"SCSI: (Read|Write)\((\d+)\) LUN"), lambda m: f"SCSI {m[1].upper()}({m[2]}) {{size}}"),
    (re.compile(r"Data In"), lambda m: "Data-In"),
    (re.compile(r"Data Out"), lambda m: "Data-Out"),
    (re.compile(r"Ready To Transfer|\bR2T\b", re.I), lambda m: "R2T"),
    (re.compile(r"SCSI: Response"), lambda m: "SCSI Response"),
    (re.compile(r"NVMe (Read|Write)\b(?! \w)"), lambda m: f"NVMe {m[1]} {{size}}"),
    (re.compile(r"NVMeOF Data for Read"), lambda m: "C2HData"),
    (re.compile(r"NVMeOF Data for Write"), lambda m: "H2CData"),
    (re.compile(r"NVMe CQE"), lambda m: "NVMe completion"),
    # the fabrics commands of a queue's set-up, and their completions
    (re.compile(r"NVMeOF (Connect|Authentication Send|Authentication Recv)\b"), lambda m: m[1]),
    (
        re.compile(r"NVMeOF CQE for (Connect|Authentication Send|Authentication Recv)\b"),
        lambda m: "completion",
    ),
]


FABRICS_COMMAND = re.compile(r"NVMeOF (Connect|Authentication Send|Authentication Recv)\b")
# NVMe in-band authentication messages, as dhchap.lua names them in the Info column
AUTH_MESSAGE = re.compile(
    r"\b(AUTH_(?:Negotiate|Failure[12])|DH-HMAC-CHAP_(?:Challenge|Reply|Success[12]))\b"
)


def size_text(nbytes: int) -> str:
    """4 KiB, 1 MiB, 512 B: a data size as a reader says it."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes:,} B"


def meaning(frame: Frame, io: Io) -> str:
    """What ``frame`` is to the protocol: its command, response or data, and the RDMA or TCP
    operation carrying it.  A TCP segment that only carries part of a PDU is named ``""``
    here; arrows() names it after the PDU it belongs to."""
    if frame.tcp_len == 0 and not frame.fpdus:
        return "TCP ACK"
    size = size_text(io.nbytes)
    words = list(dict.fromkeys(m[1] for m in AUTH_MESSAGE.finditer(frame.label)))
    if words and frame.bth < 0 and not frame.fpdus:  # an authentication message over TCP
        parts = [fmt(m).format(size=size) for rx, fmt in TCP_PDUS for m in [rx.search(frame.label)] if m]
        return " + ".join(dict.fromkeys([*parts, *words]))
    units: list[Unit] = [*frame.units] or [*frame.commands, *(Response(t) for t in frame.responses)]
    fabrics = FABRICS_COMMAND.search(frame.label)
    if fabrics and frame.bth >= 0:  # a queue's Connect or authentication: Wireshark names it
        words, units = [fabrics[1], *words], []
    for unit in units:
        if isinstance(unit, Command):
            words.append(_command(unit, frame, size))
        elif isinstance(unit, str):  # a non-I/O PDU: login, keep-alive…
            words.append(unit)
        else:
            words.append(_response(frame))
    if frame.bth >= 0:
        carrier = RC_NAMES.get(frame.bth, f"RC opcode {frame.bth}")
        return f"{' + '.join(words)} ({carrier})" if words else carrier
    if frame.fpdus:
        carriers = [RDMAP_NAMES.get(p.opcode, f"RDMAP {p.opcode}") for p in frame.fpdus]
        data = [c for c in dict.fromkeys(carriers) if not c.startswith("SEND")]
        return " + ".join([*words, *data]) or " + ".join(dict.fromkeys(carriers))
    parts = [fmt(m).format(size=size) for rx, fmt in TCP_PDUS for m in [rx.search(frame.label)] if m]
    return " + ".join(dict.fromkeys(parts))


def _response(frame: Frame) -> str:
    """A response by its transport's name for it (the registry's); an NVMe completion when the
    frame names no transport (a CQE found by its queue)."""
    transport = TRANSPORTS.get(frame.transport)
    return transport.response if transport is not None else "NVMe completion"


def _command(command: Command, frame: Frame, size: str) -> str:
    transport = TRANSPORTS.get(frame.transport)
    if transport is not None and transport.nvme:
        return f"NVMe {command.op.capitalize()} {size}"
    found = re.search(r"(?i)(read|write)\((\d+)\)", frame.label)
    cdb = f"({found[2]})" if found else ""
    prefix = transport.command_envelope if transport is not None else ""
    return f"{prefix}SCSI {command.op.upper()}{cdb} {size}"


def _kind(arrow: Arrow) -> str:
    """What a run of frames has in common: the meaning up to its first detail."""
    return arrow.meaning.split(" (")[0]


def _shortened(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut between words, never inside one
    ('offset 15' for 15360 read as a wrong number)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = max(cut.rfind(" "), cut.rfind(","))
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,") + "…"


def arrows(io: Io, sizes: bool = True, max_arrows: int | None = None) -> list[Arrow]:
    """One arrow per frame, or per run of alike frames when there are more than ``max_arrows``
    (MAX_ARROWS unless given)."""
    max_arrows = MAX_ARROWS if max_arrows is None else max_arrows
    said = [meaning(f, io) for f in io.frames]
    for i in reversed(range(len(said))):  # a TCP segment of a PDU: named after the PDU it is part of
        if not said[i]:
            same_way = [said[j] for j in range(i + 1, len(said)) if io.frames[j].src == io.frames[i].src]
            pdu = next((s for s in same_way if s and not s.startswith("segment of")), "a PDU")
            said[i] = f"segment of {pdu}"
    single = [Arrow((f,), f.src == io.initiator, s, sizes) for f, s in zip(io.frames, said, strict=True)]
    if len(single) <= max_arrows:
        return single
    merged: list[Arrow] = []
    for arrow in single:
        last = merged[-1] if merged else None
        if last and last.outbound == arrow.outbound and _kind(last) == _kind(arrow):
            merged[-1] = Arrow(last.frames + arrow.frames, last.outbound, _kind(arrow), sizes)
        else:
            merged.append(arrow)
    return merged


def _wrapped(label: str) -> list[str]:
    """The label's lines, every line whole: a size and its unit ('1,086 B', '16 KiB') never part."""
    glued = re.sub(r"(\d) (B|KiB|MiB)\b", "\\1\u00a0\\2", label)
    return [
        line.replace("\u00a0", " ")
        for line in textwrap.wrap(glued, WRAP_CHARS, break_long_words=False, break_on_hyphens=False)
    ]


def tag_text(io: Io) -> str:
    """The task's tag as its protocol writes it: SRP's 8-byte tag arrives as tshark's hex
    bytes, little-endian ('1600000000000000' is tag 0x16)."""
    if re.fullmatch(r"[0-9a-f]{16}", io.tag):
        return hex(int.from_bytes(bytes.fromhex(io.tag), "little"))
    if io.tag.isdigit() and int(io.tag) > 0xFFFF:  # an iSCSI ITT: hex, as Wireshark shows it
        return hex(int(io.tag))
    return io.tag


def ladder(
    io: Io,
    svg: Path,
    png: Path | None = None,
    title: str = "",
    save: Save | None = None,
    sizes: bool = True,
    max_arrows: int | None = None,
) -> list[Arrow]:
    """Draw ``io`` as a ladder diagram into ``svg`` (and ``png``); returns the arrows drawn.
    ``sizes=False`` leaves the frames' sizes out (a handout whose question is their sum);
    a smaller ``max_arrows`` merges runs of alike frames sooner."""
    plt = _pyplot()
    drawn = arrows(io, sizes, max_arrows)
    start = io.frames[0].time
    rows = len(drawn)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, max(3.6, 0.7 * rows + 1.7)), dpi=100)
    ax.set_xlim(-0.42, 1.25)
    ax.set_ylim(rows + 0.5, -1.0)
    ax.axis("off")
    target = next((f.dst for f in io.frames if f.src == io.initiator), "")
    for x, name in ((0, f"initiator\n{io.initiator}"), (1, f"target\n{target}")):
        ax.plot([x, x], [-0.2, rows + 0.3], color="0.4", linewidth=1.2)
        ax.text(x, -0.25, name, ha="center", va="bottom", fontsize=LABEL_PT, fontweight="bold")
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
        label = "\n".join(_wrapped(arrow.label))
        text = ax.text(0.5, row - 0.2, label, ha="center", va="bottom", fontsize=LABEL_PT, linespacing=1.0)
        text.set_gid(f"label-{arrow.gid}")
        ax.text(-0.4, row, f"{at_us:,.0f} µs", ha="left", va="center", fontsize=LABEL_PT - 1, color="0.3")
    head = title or f"{io.op} {size_text(io.nbytes)}, tag {tag_text(io)}: {io.latency_us:,.0f} µs on the wire"
    ax.set_title(f"{head}\n{EMULATED}", fontsize=LABEL_PT - 1)
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
    # The legend sits under the axes, one line a curve, so it never covers one.
    fig, ax = plt.subplots(figsize=(7, 4.2 + 0.22 * len(groups)), dpi=110)
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
    ax.set_title(f"{title or 'latency per operation (from the capture)'}\n{EMULATED}", fontsize=10)
    if groups:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.16), frameon=False)
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

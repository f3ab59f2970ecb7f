"""Ladder pictures say what each frame means to its protocol, whole, and that they are emulated.

A ladder's arrows are read by someone learning the protocols: each is named
by the command, response, data PDU or RDMA operation it is ("SCSI READ(10)
4 KiB", "RDMA WRITE Middle", "NVMe completion"), never by Wireshark's TCP
line (Seq=, Ack=, TSval=), and no label is cut short.  The SRP tag is the
number the initiator chose, not tshark's byte dump; every picture drawn
from a capture says it was captured under emulation.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from sanlab.dissectors import pictures
from sanlab.dissectors.analyze import analyze
from support import REPO, require_tool

pytestmark = pytest.mark.tshark
GOLDEN = REPO / "tests" / "golden"
SVG = "{http://www.w3.org/2000/svg}"
# (capture, op, bytes, the command arrow's label)
COMMANDS = [
    ("iscsi-tcp", "read", 4096, "SCSI READ(10) 4 KiB"),
    ("iscsi-tcp", "write", 16384, "SCSI WRITE(10) 16 KiB + Data-Out"),
    ("nvme-tcp", "read", 4096, "NVMe Read 4 KiB"),
    ("srp-rxe", "write", 4096, "SRP_CMD: SCSI WRITE(10) 4 KiB (SEND First)"),
    ("iser-rxe", "read", 4096, "SCSI READ(10) 4 KiB (SEND)"),
    ("iser-rxe", "write", 16384, "SCSI WRITE(10) 16 KiB (SEND First)"),  # 'Last (1,086 B)' wraps
    ("iser-siw", "read", 4096, "SCSI READ(10) 4 KiB"),
    ("nvme-rdma-rxe", "read", 16384, "NVMe Read 16 KiB (SEND)"),
    ("nvme-rdma-siw", "write", 16384, "NVMe Write 16 KiB"),
]
RAW_TSHARK = re.compile(r"Seq=|Ack=|TSval|Win=|QP=0x|\[TCP")


def _io(capture: str, op: str, size: int):
    require_tool("tshark")
    result = analyze(GOLDEN / f"{capture}.pcap", labels=True)
    return next(i for i in result.ios if i.op == op and i.nbytes == size)


def _lines(svg) -> list[list[str]]:
    """Each arrow label's lines, as the SVG draws them."""
    root = ET.parse(svg).getroot()
    return [
        [line for t in g.iter(f"{SVG}text") for line in "".join(t.itertext()).split("\n")]
        for g in root.iter(f"{SVG}g")
        if g.get("id", "").startswith("label-frames-")
    ]


def _labels(svg) -> list[str]:
    return [" ".join(lines) for lines in _lines(svg)]


@pytest.mark.parametrize(("capture", "op", "size", "command"), COMMANDS)
def test_arrows_are_named_by_protocol_meaning_and_drawn_whole(tmp_path, capture, op, size, command):
    io = _io(capture, op, size)
    drawn = pictures.ladder(io, tmp_path / "io.svg")
    command_arrow = next(a for a in drawn if a.outbound and ("SCSI" in a.meaning or "NVMe" in a.meaning))
    assert command_arrow.meaning.removeprefix("segment of ") == command, [a.label for a in drawn]
    for arrow in drawn:
        assert not RAW_TSHARK.search(arrow.label), arrow.label
        assert "…" not in arrow.label, arrow.label
    shown = _labels(tmp_path / "io.svg")
    assert len(shown) == len(drawn)
    for arrow, text in zip(drawn, shown, strict=True):  # every word of the label is in the picture
        assert text.split() == arrow.label.split(), (text, arrow.label)
    assert all(re.search(r"\(\d[\d,]* B\)$", text) for text in shown)  # sizes end each label
    for lines in _lines(tmp_path / "io.svg"):  # and no value is parted from its unit by a wrap
        assert not any(
            re.search(r"\d$", a) and re.match(r"(B|KiB|MiB)\b", b)
            for a, b in zip(lines, lines[1:], strict=False)
        )
    assert "emulated" in (tmp_path / "io.svg").read_text()


def test_without_sizes_no_frame_size_is_labelled(tmp_path):
    io = _io("nvme-tcp", "read", 4096)
    pictures.ladder(io, tmp_path / "io.svg", sizes=False)
    assert not any(re.search(r"\d B\b", text) for text in _labels(tmp_path / "io.svg"))


def test_the_srp_tag_is_the_initiators_number(tmp_path):
    io = _io("srp-rxe", "write", 4096)
    assert re.fullmatch(r"[0-9a-f]{16}", io.tag)  # tshark's bytes, little-endian
    pictures.ladder(io, tmp_path / "io.svg")
    title = (tmp_path / "io.svg").read_text()
    assert f"tag {pictures.tag_text(io)}:" in title and int(pictures.tag_text(io), 16) < 1 << 16
    assert io.tag not in title


def test_runs_of_alike_packets_merge_into_one_arrow_that_counts_them(tmp_path):
    io = _io("nvme-rdma-rxe", "read", 16384)
    drawn = pictures.arrows(io, sizes=False, max_arrows=0)
    assert [a.label for a in drawn] == [
        "NVMe Read 16 KiB (SEND)",
        "RC ACK",
        "RDMA WRITE First",
        "14 x RDMA WRITE Middle",
        "RDMA WRITE Last",
        "NVMe completion (SEND with Invalidate)",
        "2 x RC ACK",
    ]


def test_the_latency_chart_says_emulated_and_its_legend_sits_below_the_curves(tmp_path):
    result = analyze(GOLDEN / "nvme-tcp-qd4.pcap")
    pictures.latency_chart(result.ios, tmp_path / "lat.svg")
    root = ET.parse(tmp_path / "lat.svg").getroot()
    assert "emulated" in " ".join(root.itertext())
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("id", "").startswith("legend"))
    axes = next(g for g in root.iter(f"{SVG}g") if g.get("id", "").startswith("axes"))
    patch = next(axes.iter(f"{SVG}path"))  # the axes' background rectangle
    ys = [float(v) for v in re.findall(r"[ML] [\d.]+ ([\d.]+)", patch.get("d", ""))]
    legend_ys = [float(t.get("y", 0)) for t in legend.iter(f"{SVG}text") if t.get("y")]
    moved = re.findall(r"translate\([\d.]+ ([\d.]+)\)", ET.tostring(legend, "unicode"))
    legend_ys += [float(v) for v in moved]
    assert legend_ys and min(legend_ys) > max(ys), (legend_ys, ys)

"""A lab's set-up as a picture: its hosts, what runs on them, and the cables between them.

Drawn from the scenario file itself, so a handout's picture cannot drift from
the lab it describes, and it shows the set-up only: names, roles, stacks,
fabrics and MTUs, never a figure a question asks for.  Plain SVG, sized so
that its text stays legible at a phone's width.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from sanlab.scenarios.plan import PlannedLink
from sanlab.scenarios.registry import FABRICS, STACKS, TRANSPORTS
from sanlab.scenarios.schema import Host, Scenario, Target
from sanlab.scenarios.sizes import format_size

# 640 units drawn 640 pixels wide on a desktop and about 360 on a 390-pixel phone: 18 to 21-unit
# text stays 10 to 12 pixels high there.
WIDTH, BOX_W, ROW, FONT = 640, 220, 27, 20
INK, FAINT, ACCENT = "#1f2937", "#e5e7eb", "#2563eb"


def _host_lines(host: Host, scenario: Scenario) -> list[str]:
    """What runs on a host: its targets (stack, transport, storage), or the initiators it uses."""
    if host.role == "target":
        served = [t for t in scenario.targets if t.host == host.name]
        return [line for t in served for line in (_served(t), _storage(t))]
    used = dict.fromkeys(TRANSPORTS[t.transport].initiator for t in scenario.targets)
    return list(used) + (["fio"] if scenario.workloads else [])


def _served(target: Target) -> str:
    return f"{STACKS[target.stack].title} {TRANSPORTS[target.transport].title}"


def _storage(target: Target) -> str:
    kind = {"ramdisk": "RAM disk", "null": "null device", "file": "file", "device": "block device"}
    size = format_size(target.size)
    readable = f"{size[:-1]} {size[-1].upper()}iB" if size[-1].isalpha() else f"{size} bytes"
    return f"{readable} {kind[target.backstore]}"


def _link_label(planned: PlannedLink, captured: bool) -> str:
    fabric = FABRICS[planned.link.fabric]
    driver = planned.rdma_driver
    named = f"{planned.name}: {fabric.title}" + (f" ({driver})" if driver else "")
    return f"{named}, MTU {planned.link.mtu}" + (", captured" if captured else "")


def _text(x: float, y: float, text: str, size: int = FONT, anchor: str = "middle", weight: str = "") -> str:
    bold = ' font-weight="bold"' if weight else ""
    return (
        f'<text x="{x:.0f}" y="{y:.0f}" font-size="{size}" text-anchor="{anchor}"{bold} '
        f'fill="{INK}">{escape(text)}</text>'
    )


def _box(x: float, y: float, host: Host, lines: list[str], rows: int) -> list[str]:
    title = host.name if host.name == host.role else f"{host.name} ({host.role})"
    height = ROW * rows + 14
    frame = f'width="{BOX_W}" height="{height}" rx="8" fill="{FAINT}" stroke="{INK}"'
    parts = [f'<rect x="{x}" y="{y}" {frame}/>']
    parts.append(_text(x + BOX_W / 2, y + ROW + 2, title, FONT + 1, weight="bold"))
    for i, line in enumerate(lines):
        parts.append(_text(x + BOX_W / 2, y + (i + 2) * ROW + 2, line, FONT - 1))
    return parts


def setup_svg(scenario: Scenario) -> str:
    """Initiators on the left, targets on the right, one line per cable between them."""
    left = [h for h in scenario.hosts if h.role == "initiator"]
    right = [h for h in scenario.hosts if h.role == "target"]
    lines = {h.name: _host_lines(h, scenario) for h in scenario.hosts}
    tallest = max(3, max(len(v) for v in lines.values()) + 1)  # room for a cable and its labels
    block = ROW * tallest + 44
    height = max(len(left), len(right), 1) * block + 10 + 26 * len(scenario.projections)
    parts = []
    places: dict[str, float] = {}
    for column, hosts in ((10, left), (WIDTH - BOX_W - 10, right)):
        for k, host in enumerate(hosts):
            y = 20 + k * block
            places[host.name] = y
            parts += _box(column, y, host, lines[host.name], tallest)
    for i, planned in enumerate(scenario.plan.links):
        link = planned.link
        a, b = link.endpoints
        if a not in places or b not in places:
            continue
        y = (places[a] + places[b]) / 2 + ROW * 1.6 + 62 * (i % 3)
        colour = ACCENT if FABRICS[link.fabric].rdma else INK
        parts.append(
            f'<line x1="{10 + BOX_W}" y1="{y:.0f}" x2="{WIDTH - BOX_W - 10}" y2="{y:.0f}" '
            f'stroke="{colour}" stroke-width="3"/>'
        )
        name, _, rest = _link_label(planned, scenario.capture).partition(", ")
        parts.append(_text(WIDTH / 2, y - 8, name, FONT - 2))  # the cable's name and fabric above it,
        parts.append(_text(WIDTH / 2, y + 22, rest, FONT - 2))  # its MTU and capture below
    for k, projection in enumerate(scenario.projections):
        label = projection.label or projection.profile
        note = f"projected onto {label} (profile {projection.profile})"
        parts.append(_text(WIDTH / 2, height - 10 - 26 * k, note, FONT - 1))
    body = "\n  ".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'font-family="sans-serif" role="img">\n  {body}\n</svg>\n'
    )


def write(scenario: Scenario, path: Path) -> None:
    path.write_text(setup_svg(scenario))

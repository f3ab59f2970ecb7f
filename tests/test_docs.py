"""The documentation site: generated, built strictly, every link and image resolving, seen in Chromium.

`mkdocs build --strict` alone builds the site: its hook (docs/hooks.py) runs
docs/generate.py, which writes the references and pictures from the code.
Every relative link and image of every page must resolve to a file of the
built site.  The student site holds no answer key, in its pages or its
search index; the teachers' edition (mkdocs-teacher.yml) holds them all.
Headless Chromium then opens the home, model and scenario-reference pages,
and their screenshots are kept in runs/docs-screenshots/ for a person to
look at.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from support import REPO, require_tool

pytestmark = [pytest.mark.tshark, pytest.mark.browser]  # the ladders need tshark
SCREENSHOTS = REPO / "runs" / "docs-screenshots"
KEY_PAGES = [
    "index.html",
    "contributing.html",
    "measurements/targets.html",
    "measurements/models.html",
    "model.html",
    "reference/scenarios.html",
    "concepts.html",
    "labs/iscsi-wire.html",
    "labs/project-100g.html",
]
WIDTHS = (1280, 390)  # a desktop and a phone


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and (name, tag) in (("href", "a"), ("href", "link"), ("src", "img"), ("src", "script")):
                self.targets.append((tag, value))


def _build(out: Path, *config: str) -> None:
    """`mkdocs build --strict` alone, as a reader would run it: no generate step first."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    built = subprocess.run(
        [str(mkdocs), "build", "--strict", *config, "-d", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
    )
    assert built.returncode == 0, built.stderr[-3000:]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    require_tool("tshark")
    out = tmp_path_factory.mktemp("site")
    _build(out)
    return out


ANSWER_PICTURES = ("ladder-iscsi-read.svg", "lab-project-100g.png")
KEYS = sorted((REPO / "docs" / "labs" / "keys").glob("*.md"))
KEY_DIR = REPO / "docs" / "labs" / "keys"


def test_no_file_of_the_student_site_comes_from_a_key(site):
    """Every file of the built folder, linked or not: none is a key's page or picture, by path,
    by a key picture's name, or by content (a key picture copied under another name)."""
    import hashlib

    keys = [p for p in KEY_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    pictures = [p for p in keys if p.suffix != ".md"]
    assert {p.name for p in pictures} >= set(ANSWER_PICTURES)  # the build wrote the keys' pictures
    digests = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in pictures}
    files = [p for p in site.rglob("*") if p.is_file()]
    assert len(files) > 50
    for path in files:
        rel = path.relative_to(site).as_posix()
        assert "keys/" not in rel, rel
        assert path.name not in {p.name for p in pictures}, rel
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert digest not in digests, f"{rel} is {digests.get(digest)}"


def _answers() -> dict[str, list[float]]:
    """Every numeric answer of every lab's checks: given (equals), what the analyser measures
    on each golden capture (analyze: the student's capture is one like these), or what the
    model projects (model)."""
    from click.testing import CliRunner

    from sanlab.dissectors.analyze import analyze
    from sanlab.main import cli
    from sanlab.scenarios.labs.exercises import load_exercises

    captures = [analyze(p) for p in sorted((REPO / "tests" / "golden").glob("*.pcap"))]
    found: dict[str, list[float]] = {}
    for path in sorted((REPO / "scenarios" / "labs").glob("*.checks.yaml")):
        for exercise in load_exercises(path).exercises.values():
            for step in exercise.steps:
                probe = step.answer
                if probe is None:
                    continue
                values = found.setdefault(probe.key, [])
                if probe.equals is not None:
                    values += [float(probe.equals)] if re.fullmatch(r"[\d.]+", str(probe.equals)) else []
                elif probe.analyze is not None:
                    want = probe.analyze
                    for result in captures:
                        values += [
                            float(getattr(g, want.field))
                            for g in result.groups
                            if (g.op, g.bytes) == (want.op, want.bytes)
                        ]
                elif probe.model is not None and probe.model.field != "bottleneck":
                    argv = ["model", "--json"]
                    for key, value in probe.model.options.items():
                        argv += [f"--{key.replace('_', '-')}", str(value)]
                    run = CliRunner().invoke(cli, argv)
                    values.append(float(json.loads(run.output)["results"][0][probe.model.field]))
    return found


def _sizes(text: str) -> int:
    """The bytes a label states: '1,514 B', '4 KiB', '1 MiB'."""
    scale = {"B": 1, "KiB": 1024, "MiB": 1 << 20}
    found = re.findall(r"(\d[\d,]*)\s*(B|KiB|MiB)\b", text)
    return sum(int(n.replace(",", "")) * scale[u] for n, u in found)


def test_no_handout_picture_sums_to_an_answer(site):
    """Labs 3 and 4 ask for the captured bytes of one I/O: a handout ladder labelling each
    frame's size would answer them by addition.  Sum what every arrow of every picture a
    handout shows states, and check it against every answer within 2 %."""
    import xml.etree.ElementTree as ET

    answers = _answers()
    assert answers["tcp_bytes_per_read"] and answers["bytes_per_4k_write"]
    handouts = [p for p in (site / "labs").glob("*.html")] + [site / "index.html"]
    checked = 0
    for page in handouts:
        for src in re.findall(r'<img[^>]+src="([^"]+\.svg)"', page.read_text()):
            root = ET.parse(page.parent / unquote(src)).getroot()
            labels = [
                " ".join(root_text for root_text in g.itertext())
                for g in root.iter("{http://www.w3.org/2000/svg}g")
                if g.get("id", "").startswith("label-frames-")
            ]
            if not labels:
                continue  # a set-up drawing, not a ladder
            checked += 1
            total = sum(_sizes(label) for label in labels)
            for key, values in answers.items():
                for value in values:
                    assert not (value and abs(total - value) <= 0.02 * value), (
                        f"{page.name}: {src}'s labels sum to {total:,} B, the answer {key} ({value:,})"
                    )
    assert checked >= 5


def test_search_finds_pages_from_disk(site):
    """Opened from file:// (no server), search answers: its index is inlined as a script and
    its worker runs in an iframe (mkdocs.yml: the offline plugin and the vendored shim)."""
    chromium = shutil.which("chromium") or require_tool("chromium")
    assert (site / "search" / "search_index.js").is_file()
    url = (site / "index.html").as_uri() + "?q=dissector"
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    found = re.search(r'md-search-result__meta">(\d+) matching document', dom)
    assert found and int(found[1]) >= 1, dom[-2000:]
    hits = re.findall(r'<a href="([^"#]+)[^"]*" class="md-search-result__link"', dom)
    assert hits and all(Path(unquote(urlparse(hit).path)).is_file() for hit in hits), hits


def test_the_student_site_holds_no_answer_key(site, tmp_path):
    assert not (site / "labs" / "keys").exists()
    index = (site / "search" / "search_index.json").read_text()
    assert "labs/keys/" not in index
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "labs/keys/" not in text, page
        assert "0x25" not in text, f"{page} gives lab 1's opcode away"
        for picture in ANSWER_PICTURES:  # they show counts and bottlenecks the labs ask for
            assert picture not in text, f"{page} shows {picture}"
    assert "0x25" not in index
    teacher = tmp_path / "teacher"
    _build(teacher, "-f", "mkdocs-teacher.yml")
    assert sorted(p.stem for p in (teacher / "labs" / "keys").glob("*.html")) == [k.stem for k in KEYS]


def test_the_scenario_reference_covers_every_section_of_the_schema(site):
    import json

    schema = json.loads((REPO / "scenarios" / "schema.json").read_text())
    page = (site / "reference" / "scenarios.html").read_text()
    for name, model in schema["$defs"].items():
        assert f'id="{name.lower()}"' in page, f"{name} has no section"
        for field in model.get("properties", {}):
            assert f"<code>{field}</code>" in page, f"{name}.{field} is not described"


def test_every_page_is_built(site):
    for page in KEY_PAGES + ["getting-started.html", "reference/cli.html", "targets.html", "dissectors.html"]:
        assert (site / page).is_file(), page


def test_no_broken_link_or_missing_image(site):
    broken = []
    for page in site.rglob("*.html"):
        parser = _Links()
        parser.feed(page.read_text())
        for tag, target in parser.targets:
            url = urlparse(target)
            if url.scheme or target.startswith(("#", "mailto:")):
                continue
            path = unquote(url.path)
            base = site if path.startswith("/") else page.parent  # 404.html links from the site root
            resolved = (base / path.lstrip("/")).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(site)}: <{tag}> {target}")
    assert not broken, "\n".join(broken)


def test_the_references_come_from_the_code(site):
    scenarios = (site / "reference" / "scenarios.html").read_text()
    assert "verify_size" in scenarios and "rdma_driver" in scenarios
    cli = (site / "reference" / "cli.html").read_text()
    for command in ("sanlab sweep", "sanlab lab capture", "sanlab analyze", "sanlab run"):
        assert command in cli, command


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", KEY_PAGES)
def test_a_real_browser_shows_the_page(site, page, width):
    chromium = shutil.which("chromium") or require_tool("chromium")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / (re.sub(r"[/.]", "-", page.removesuffix(".html")) + f"-{width}.png")
    shot.unlink(missing_ok=True)
    common = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},1000",
    ]
    url = (site / page).as_uri()
    # One browser start takes the screenshot and prints the DOM it rendered (two starts before).
    taken = subprocess.run(
        [*common, f"--screenshot={shot}", "--dump-dom", url], capture_output=True, text=True, timeout=120
    )
    assert taken.returncode == 0 and shot.stat().st_size > 30_000, taken.stderr[-2000:]
    dom = taken.stdout
    assert "sanlab" in dom and "<article" in dom  # the page's content rendered, not an error page
    for image in re.findall(r'<img[^>]+src="([^"]+)"', dom):
        assert (site / page).parent.joinpath(unquote(image)).resolve().is_file(), image
    print(f"screenshot of {page}: {shot}")


def test_the_readme_is_read_in_five_minutes():
    """At most 120 lines, the two set-up commands, and a tour that says which commands boot VMs."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 120
    assert "bash tests/bootstrap demo" in readme and "bash tests/bootstrap test" in readme
    assert "No VMs, seconds:" in readme and "VMs (times under software emulation" in readme


def test_getting_started_is_for_users_and_its_tour_fits_a_phone():
    """No development notes (dated CI timings, benchmark scripts: docs/contributing.md), and the
    tour's comments on lines of their own, short enough for a 390-pixel screen."""
    page = (REPO / "docs" / "getting-started.md").read_text()
    assert not re.search(r"20\d\d-\d\d-\d\d", page) and "ci_under_load" not in page
    assert "ci_under_load" in (REPO / "docs" / "contributing.md").read_text()
    tour = page.split("## A short tour", 1)[1].split("```console\n", 1)[1].split("```", 1)[0]
    for line in tour.splitlines():
        assert not (line.startswith("$") and " # " in line), line
        assert not line.startswith("#") or len(line) <= 46, line

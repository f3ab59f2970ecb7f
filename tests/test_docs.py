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
    taken = subprocess.run(
        [*common, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120
    )
    assert taken.returncode == 0 and shot.stat().st_size > 30_000, taken.stderr[-2000:]
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
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

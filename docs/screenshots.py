"""Build the student site and take headless-Chromium screenshots of the pages a newcomer reads
first, at a desktop's and a phone's width, for a person to look at after changing a picture or
a page's layout (issue #48: ladder labels must read at 390 px).

    python docs/screenshots.py [--out runs/docs-screenshots] [--site DIR]

Writes PAGE-WIDTH.png into --out (a folder of its own: only these names are written).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = {
    "home": "index.html",
    "lab1": "labs/iscsi-wire.html",
    "lab3": "labs/nvme-tcp-rdma.html",
    "lab6": "labs/project-100g.html",
    "model": "model.html",
    "debugging": "debugging.html",
}
# (width, height): tall windows, so the pictures below the first screen are in the shot too.
SIZES = ((1280, 3600), (390, 6400))


def build(site: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    subprocess.run([str(mkdocs), "build", "--strict", "-q", "-d", str(site)], cwd=REPO, check=True)


def shoot(chromium: str, url: str, shot: Path, width: int, height: int) -> None:
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    argv += [f"--window-size={width},{height}", f"--screenshot={shot}", url]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "docs-screenshots")
    parser.add_argument("--site", type=Path, help="a site built already (default: build one)")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("screenshots.py: chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site or Path(tmp) / "site"
        if args.site is None:
            build(site)
        for name, page in PAGES.items():
            for width, height in SIZES:
                shot = args.out / f"{name}-{width}.png"
                shoot(chromium, (site / page).as_uri(), shot, width, height)
                print(shot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

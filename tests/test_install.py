"""The README's install follows the clone: a fit is written beside the clone's own files.

``bash tests/bootstrap`` installs sanlab editable (setuptools' strict mode: a tree
of links to the clone's files), so an edited checks file or profile takes effect
at once and mypy can follow the package.  A writer that replaced the link would
leave the clone unchanged and lose the fit at the next install.
"""

from __future__ import annotations

from pathlib import Path

from sanlab.models.core.profile_files import apply_fit, fit_path


def _linked_profile(tmp_path: Path) -> tuple[Path, Path]:
    clone, tree = tmp_path / "clone", tmp_path / "tree"
    clone.mkdir()
    tree.mkdir()
    (clone / "bench.yaml").write_text("name: bench\n")
    (tree / "bench.yaml").symlink_to(clone / "bench.yaml")
    return clone, tree / "bench.yaml"


def test_a_fit_goes_beside_the_file_a_link_points_to(tmp_path):
    clone, linked = _linked_profile(tmp_path)
    assert fit_path(linked) == clone / "bench.fit.yaml"


def test_a_fit_written_in_the_clone_is_read_through_the_link(tmp_path):
    clone, linked = _linked_profile(tmp_path)
    (clone / "bench.fit.yaml").write_text("parameters: {host.cores: 7}\n")
    assert apply_fit({"name": "bench", "host": {"cores": 1}}, linked)["host"]["cores"] == 7


def test_a_plain_file_keeps_its_fit_beside_it(tmp_path):
    (tmp_path / "x.yaml").write_text("name: x\n")
    assert fit_path(tmp_path / "x.yaml") == tmp_path / "x.fit.yaml"

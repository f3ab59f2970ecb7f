"""mkdocs hook: write the pages and pictures that come from the code before every build.

With it, ``mkdocs build`` alone builds the whole site (docs/generate.py no
longer has to be run first), so the site cannot be built stale.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_done = False


def on_pre_build(config: Any, **_: Any) -> None:
    """Once per process: `mkdocs serve` rebuilds on every edit, and the pictures take seconds."""
    global _done
    if _done:
        return
    spec = importlib.util.spec_from_file_location(
        "sanlab_docs_generate", Path(__file__).with_name("generate.py")
    )
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    from sanlab.scenarios.errors import SanlabError

    try:
        generate.main()
    except SanlabError as exc:  # a broken scenario or profile: one line, not mkdocs's traceback
        from mkdocs.exceptions import PluginError

        raise PluginError(f"docs/generate.py: {exc}") from None
    _done = True

"""Where sanlab's Lua plugins are, how to install them, and how tshark loads them."""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

PLUGINS = ("scsi.lua", "srp.lua", "iwarp.lua")  # scsi.lua: the CDB decoding both others use


def plugin_dir() -> Path:
    """The folder inside the installed package that holds the Lua files."""
    return Path(str(resources.files("sanlab.dissectors")))


def plugin_paths() -> list[Path]:
    return [plugin_dir() / name for name in PLUGINS]


def personal_plugin_dir() -> Path:
    """Wireshark's personal plugin folder ($XDG_CONFIG_HOME is not used for plugins)."""
    return Path(os.environ.get("HOME", "~")).expanduser() / ".local/lib/wireshark/plugins"


def install(destination: Path | None = None) -> list[Path]:
    """Copy the plugins into Wireshark's personal plugin folder; return the new paths."""
    target = destination or personal_plugin_dir()
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for source in plugin_paths():
        dest = target / f"sanlab-{source.name}"
        shutil.copyfile(source, dest)
        copied.append(dest)
    return copied


def tshark_args() -> list[str]:
    """Arguments that make tshark load sanlab's dissectors for one run."""
    args: list[str] = []
    for path in plugin_paths():
        args += ["-X", f"lua_script:{path}"]
    return args

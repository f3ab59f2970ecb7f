"""Where sanlab's Lua plugins are, how to install them, and how tshark loads them."""

from __future__ import annotations

import os
import stat
from importlib import resources
from pathlib import Path

from sanlab.scenarios.results.outdir import OutputFolder

# scsi.lua: the CDB decoding srp.lua and iwarp.lua use; dhchap.lua: NVMe in-band authentication
PLUGINS = ("scsi.lua", "srp.lua", "iwarp.lua", "dhchap.lua")
# What the analyser's own tshark run needs: dhchap.lua's postdissector reads fields, which makes
# tshark build every frame's tree (twice the time on nvme-rdma-rxe-qd4.pcap), and the analyser
# reads none of them; only a ladder's labels (the authentication's names) want it.
ANALYSER_PLUGINS = ("scsi.lua", "srp.lua", "iwarp.lua")


def plugin_dir() -> Path:
    """The folder inside the installed package that holds the Lua files."""
    return Path(str(resources.files("sanlab.dissectors")))


def plugin_paths(names: tuple[str, ...] = PLUGINS) -> list[Path]:
    return [plugin_dir() / name for name in names]


def personal_plugin_dir() -> Path:
    """Wireshark's personal plugin folder ($XDG_CONFIG_HOME is not used for plugins)."""
    return Path(os.environ.get("HOME", "~")).expanduser() / ".local/lib/wireshark/plugins"


def install(destination: Path | None = None) -> list[Path]:
    """Copy the plugins into Wireshark's personal plugin folder; return the new paths.

    The folder's manifest (scenarios/results/outdir.py) says which files sanlab put
    there: only those are replaced.  A user's file of the same name, or a
    link, is refused before anything is written; one already holding
    exactly the plugin's bytes (an install by an older sanlab) is left as it is.
    """
    target = destination or personal_plugin_dir()
    folder = OutputFolder.open(target, "--to")
    plugins = {f"sanlab-{source.name}": source.read_bytes() for source in plugin_paths()}
    fresh = {name: data for name, data in plugins.items() if not _same(target / name, data)}
    for name in fresh:
        folder.claim(name)  # every name checked before the first is written
    for name, data in fresh.items():
        folder.write_bytes(name, data)
    return [target / name for name in plugins]


def _same(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file (not a link) holding exactly ``data``."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == len(data) and path.read_bytes() == data


def tshark_args(names: tuple[str, ...] = PLUGINS) -> list[str]:
    """Arguments that make tshark load sanlab's dissectors (``names``: some of them) for one run."""
    args: list[str] = []
    for path in plugin_paths(names):
        args += ["-X", f"lua_script:{path}"]
    return args

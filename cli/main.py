"""The ``sanlab`` command: one group, one small module of wiring per verb.

Each verb's module is imported only when that verb runs: the model's
fitting (SciPy), the pictures (Matplotlib) and Dask cost a second to
import and a hundred megabytes to hold, and ``sanlab --version``, ``lab
exec`` or ``analyze`` need none of them.
"""

from __future__ import annotations

import errno
import gc
import importlib
import os
import sys
from typing import Any, NoReturn

import click

from sanlab import __version__

# verb -> (module, attribute): one module per verb group.
COMMANDS = {
    "validate": ("sanlab.validation", "validate"),
    "model": ("sanlab.commands_model", "model"),
    "calibrate": ("sanlab.commands_calibrate", "calibrate"),
    "sweep": ("sanlab.commands_sweep", "sweep"),
    "run": ("sanlab.commands_run", "run"),
    "compare": ("sanlab.commands_compare", "compare"),
    "blktests": ("sanlab.commands_blktests", "blktests"),
    "lab": ("sanlab.commands_lab", "lab"),
    "analyze": ("sanlab.commands_analyze", "analyze"),
    "images": ("sanlab.commands_images", "images"),
    "dissectors": ("sanlab.commands_dissect", "dissectors"),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name]
        command = getattr(_import_for_good(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """The command, and one line (exit 1) when standard output cannot take what it prints: a
        full disk (``> /dev/full``), a read-only one, or a reader that went away (``| head``)."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.errno not in OUTPUT_ERRORS:
                raise
            _cannot_write_output(exc)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Click's main, with what is still buffered flushed here rather than at exit (where a
        full disk is a traceback in the interpreter's shutdown)."""
        try:
            try:
                return super().main(*args, **kwargs)
            finally:
                sys.stdout.flush()
        except OSError as exc:
            if exc.errno not in OUTPUT_ERRORS:
                raise
            _cannot_write_output(exc)


def _import_for_good(module: str) -> Any:
    """A verb's module, imported without the cyclic collector, whose objects it then never walks.

    Importing ``sanlab model``'s module leaves some 68,000 tracked objects (modules, classes,
    functions, pydantic's schemas) that live as long as the process; the collector ran about a
    hundred times while they were built and walked them again in each later collection that
    reached them: about 90 ms CPU of a 0.6-0.8 s point, 5 ms after this (issue #46).  What the
    verb then makes is collected as before.  Once a process (a test session imports each verb once).
    """
    if module in sys.modules:
        return sys.modules[module]
    enabled = gc.isenabled()
    gc.disable()
    try:
        imported = importlib.import_module(module)
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    return imported


def _cannot_write_output(exc: OSError) -> NoReturn:
    _silence_stdout()
    reason = exc.strerror or os.strerror(exc.errno or 0)
    click.echo(f"Error: cannot write the output ({reason})", err=True)
    sys.exit(1)


# What a write to standard output (or a file) fails with when the disk or the reader is gone.
OUTPUT_ERRORS = {errno.EPIPE, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush at exit finds
    nothing to fail on (it would print 'Exception ignored' and exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="sanlab")
def cli() -> None:
    """sanlab: emulate, dissect and project block-storage transports.

    \b
    Start here:
      sanlab model                              # project Zeta 2016 (iSCSI/iSER/SRP)
      sanlab validate scenarios/smoke.yaml      # check a scenario file
      sanlab model --transport nvme-rdma --fabric roce --link-gbps 100 \\
                   --rw randread --bs 4k --iodepth 32 --numjobs 4
    """

"""The ``sanlab`` command: one group, one small module of wiring per verb.

Each verb's module is imported only when that verb runs: the model's
fitting (SciPy), the pictures (Matplotlib) and Dask cost a second to
import and a hundred megabytes to hold, and ``sanlab --version``, ``lab
exec`` or ``analyze`` need none of them.
"""

from __future__ import annotations

import importlib

import click

from sanlab import __version__

# verb -> (module, attribute); 'lab' comes from the module that adds export, connect, fio… to it.
COMMANDS = {
    "validate": ("sanlab.validation", "validate"),
    "model": ("sanlab.commands_model", "model"),
    "calibrate": ("sanlab.commands_calibrate", "calibrate"),
    "sweep": ("sanlab.commands_sweep", "sweep"),
    "run": ("sanlab.commands_run", "run"),
    "lab": ("sanlab.commands_lab_targets", "lab"),
    "analyze": ("sanlab.commands_analyze", "analyze"),
    "images": ("sanlab.commands_lab", "images"),
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
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


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

"""The ``sanlab`` command: one group, one small module of wiring per verb."""

from __future__ import annotations

import click

from sanlab import __version__
from sanlab.commands_analyze import analyze
from sanlab.commands_dissect import dissectors
from sanlab.commands_lab import images, lab
from sanlab.commands_lab_targets import lab_export  # noqa: F401 - adds export, connect, fio… to lab
from sanlab.commands_model import calibrate, model
from sanlab.commands_run import run
from sanlab.commands_sweep import sweep
from sanlab.validation import validate


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


for command in (validate, model, calibrate, sweep, run, lab, analyze, images, dissectors):
    cli.add_command(command)

"""Moved to scenarios/results/outdir.py (issue #49): this alias stays only until the run and lab
sessions (targets/sessions/run_session.py, on_machines.py, lab_targets.py) import the new
path.  Nothing new may import it."""

from sanlab.scenarios.results.outdir import *  # noqa: F403

"""A fit that answers to the simulator: the analytic solution, corrected cell by cell.

The fit's least squares runs the analytic MVA solution thousands of times,
because the simulator, which projects, would take minutes for each step.
Where the two disagree (light load, one I/O in flight, packets batched at
depth) a fit to records the simulator made - or a real machine, which the
simulator is the model of - is biased by the difference: a parameter
absorbs it.  So the fit is repeated with each cell's MVA figures multiplied
by the simulator's over the MVA's at the last fit (IOPS, latency, CPU): a
fixed-point iteration that needs one simulation per cell per round and
stops when no parameter moves more than ``SETTLED``.  The correction
varies slowly with the parameters, so two or three rounds settle it
(``tests/test_calibrate_runs.py`` measures recovery from simulator-made
records).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

from sanlab.models.calibration.calibrate import Correction, Fit, Task, busy_pct, cpu_side, evaluate, solve
from sanlab.models.core import mva
from sanlab.models.core.network import build
from sanlab.models.core.params import set_param
from sanlab.models.core.profile import Profile
from sanlab.models.core.published import Measured

ROUNDS = 4  # at most, after the plain analytic fit
SETTLED = 0.01  # no parameter moved more than this share in the last round


def solve_by_simulation(
    task: Task, seed: int = 1, rounds: int = ROUNDS, say: Callable[[str], None] = lambda m: None
) -> Fit:
    """The fit of ``task`` with its cells corrected towards the simulator until it settles;
    ``say`` hears of each round (a fit of a few hundred cells takes a while)."""
    say("  the analytic fit")
    result = solve(task)
    for round_ in range(1, rounds + 1):
        say(f"  round {round_} of at most {rounds}: simulating each cell at the last fit")
        corrections = _corrections(task, result.profiles, seed)
        task = dataclasses.replace(task, document=_at(task, result), corrections=corrections)
        previous, result = result, solve(task)
        if _settled(previous, result):
            break
    return result


def _corrections(task: Task, profiles: dict[str, Profile], seed: int) -> dict[int, Correction]:
    rows = [(name, row) for name, named in task.rows.items() for row in named]
    return {id(row): correction(profiles[name], row, seed) for name, row in rows}


def correction(profile: Profile, row: Measured, seed: int) -> Correction:
    """The simulator's IOPS, mean latency and CPU (as ``evaluate`` scores a cell) over the
    analytic solution's at ``row``."""
    (sim,) = evaluate(profile, [row], seed)
    net = build(row.point, profile)
    sol = mva.solve(net)
    latency = (sim.lat_mean_us / sol.latency_us) if sim.lat_mean_us and sol.latency_us else 1.0
    cpu = 1.0
    if sim.cpu_pct is not None:
        cpu = sim.cpu_pct / max(busy_pct(net, sol, cpu_side(profile)), 1e-6)
    return Correction(sim.iops / sol.iops, latency, cpu)


def _at(task: Task, result: Fit) -> dict:
    """The task's document with the last fit's values: the next round starts from there."""
    document = copy.deepcopy(task.document)
    for name, value in result.params.items():
        set_param(document, name, value)
    return document


def _settled(previous: Fit, current: Fit) -> bool:
    return all(abs(current.params[n] / previous.params[n] - 1) <= SETTLED for n in current.params)

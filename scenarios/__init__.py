"""The shared vocabulary of sanlab: the scenario schema and its plan, the registry, sizes and errors.

Every other layer speaks these words; this package imports nothing else of
sanlab, so it can sit at the bottom of the stack.  What a run leaves behind
(records, the output folder) is results/; the labs and their judge are
labs/.  The YAML files beside this module are the scenarios that ship with
sanlab (see README.md here).
"""

from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError, ToolMissing
from sanlab.scenarios.sizes import format_size, parse_size

__all__ = [
    "Problem",
    "SanlabError",
    "ScenarioError",
    "ToolMissing",
    "format_size",
    "parse_size",
]

"""The shared vocabulary of sanlab: scenario schema, result records, sizes and errors.

Every other layer speaks these words; this package imports nothing else of
sanlab, so it can sit at the bottom of the stack.  The YAML files beside this
module are the scenarios that ship with sanlab (see README.md here).
"""

from sanlab.scenarios.errors import Problem, SanlabError, ScenarioError, ToolMissing
from sanlab.scenarios.records import ResultRecord, write_results
from sanlab.scenarios.sizes import format_size, parse_size

__all__ = [
    "Problem",
    "ResultRecord",
    "SanlabError",
    "ScenarioError",
    "ToolMissing",
    "format_size",
    "parse_size",
    "write_results",
]

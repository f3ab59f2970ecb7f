"""Consistency rules that a schema alone cannot express.

The facts they apply are the registry's (scenarios/registry.py): which
fabrics a transport needs, which stacks serve it and which of them the
guests ship, what each protocol has (digests, CHAP, poll queues).  The rules
are grouped by what they judge: the network (network.py), targets,
workloads and projections (targets.py), and faults (faults.py); common.py
holds what they share and the questions other layers ask here.
"""

from __future__ import annotations

from sanlab.scenarios.plan import real_machines, unreached
from sanlab.scenarios.schema import Scenario
from sanlab.scenarios.semantics.common import fabric_problem
from sanlab.scenarios.semantics.faults import check_fault_timeline, check_faults
from sanlab.scenarios.semantics.network import (
    check_hosts,
    check_incast,
    check_links,
    check_machines,
    check_switch_loops,
    check_switches,
)
from sanlab.scenarios.semantics.targets import (
    MAX_OUTSTANDING,
    check_devices,
    check_guest_features,
    check_multipath,
    check_sizes,
    check_targets,
    check_workloads_and_projections,
)

__all__ = [
    "MAX_OUTSTANDING",
    "check_scenario",
    "fabric_problem",
    "real_machines",
    "unreached",
]


def check_scenario(scenario: Scenario) -> list[tuple[str, str]]:
    """Every consistency problem as (field path, message)."""
    link_problems = list(check_links(scenario))
    return (
        list(check_hosts(scenario))
        + link_problems
        + list(check_targets(scenario, links_ok=not link_problems))
        + list(check_workloads_and_projections(scenario))
        + list(check_sizes(scenario))
        + list(check_machines(scenario))
        + list(check_devices(scenario))
        + list(check_faults(scenario))
        + list(check_fault_timeline(scenario, links_ok=not link_problems))
        + list(check_switches(scenario))
        + list(check_switch_loops(scenario))
        + list(check_multipath(scenario))
        + list(check_guest_features(scenario))
        + list(check_incast(scenario, links_ok=not link_problems))
    )

"""A scenario's matrix on real machines: reach them, say what they are, refuse early, run, record.

The emulator layer reaches and reads the machines (emulator/machines.py);
this checks the devices a run would serve, works out each link's speed and
MTU from the NICs found, and runs the same matrix ``sanlab run`` runs on VMs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sanlab.emulator.machines import Preflight, connect, describe, interfaces_of, preflight
from sanlab.emulator.ssh import SshHost
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Say
from sanlab.scenarios.results.records import RunJournal
from sanlab.scenarios.schema import Scenario
from sanlab.targets.backstores import devices_refused
from sanlab.targets.host_facts import read_devices, read_host
from sanlab.targets.placement import Machines
from sanlab.targets.sessions import matrix


@contextmanager
def machine_hosts(scenario: Scenario) -> Iterator[dict[str, SshHost]]:
    """An SSH host per scenario host, their shared connections closed afterwards."""
    with tempfile.TemporaryDirectory(prefix="sanlab-ssh-") as control:
        hosts = connect(scenario, Path(control))
        try:
            yield hosts
        finally:
            for host in hosts.values():
                host.close()


def check_machines(scenario: Scenario, hosts: dict[str, SshHost], say: Say) -> Preflight:
    """Preflight: print each machine's facts; raise, listing every reason, if the run cannot start."""
    say(f"preflight: reading {', '.join(hosts)} (nothing is changed)")
    checked = preflight(scenario, hosts)
    for facts in checked.facts.values():
        for line in describe(facts):
            say(line)
    problems = checked.problems + devices_refused(scenario, hosts)
    if problems:
        raise SanlabError("preflight refused the run:\n  " + "\n  ".join(problems))
    return checked


def _link_facts(scenario: Scenario, checked: Preflight) -> tuple[dict[str, float | None], dict[str, int]]:
    """Each link's speed (Gb/s) and MTU: the lower of its two ends', as the NICs report them."""
    speeds: dict[str, float | None] = {}
    mtus: dict[str, int] = {}
    for planned in scenario.plan.links:
        name, link = planned.name, planned.link
        nics = [
            checked.facts[h].nics[(link.interfaces or {})[h]]
            for h in link.endpoints
            if (link.interfaces or {}).get(h) in checked.facts[h].nics
        ]
        rates = [n.speed_mbps for n in nics if n.speed_mbps]
        speeds[name] = min(rates) / 1000 if len(rates) == len(nics) and rates else None
        mtus[name] = min((n.mtu for n in nics if n.mtu), default=link.mtu)
    return speeds, mtus


def run_on_machines(scenario: Scenario, out: Path, journal: RunJournal, say: Say, skip: int = 0) -> None:
    """Preflight, then the matrix on the machines; every record carries both hosts' facts."""
    with machine_hosts(scenario) as hosts:
        checked = check_machines(scenario, hosts, say)
        speeds, mtus = _link_facts(scenario, checked)
        facts = {name: f.record() for name, f in checked.facts.items()}
        say("reading each host's CPU, NICs and backend devices for the records")
        described = {name: read_host(host, interfaces_of(scenario, name)) for name, host in hosts.items()}
        devices = read_devices([t.target for t in scenario.plan.targets], hosts)
        machines = Machines(facts, speeds, mtus, described, devices)
        matrix.run(scenario, hosts, checked.endpoints, out, say, sink=journal, machines=machines, skip=skip)

"""Hosts from an Ansible-style YAML inventory, so an existing fleet's list is reused as it is.

Only the part of Ansible's format that says how to reach a machine is read:
groups under ``all`` (``hosts``, ``children``, ``vars``, nested), and per
host ``ansible_host``, ``ansible_user``, ``ansible_port``,
``ansible_ssh_private_key_file`` and the ssh options of
``ansible_ssh_common_args`` and ``ansible_ssh_extra_args``, a host's own
values over its groups' (the inner group's over the outer's).  Each scenario
host is looked up by its name and becomes ``ssh: USER@ADDRESS`` with
``port``, ``identity`` and ``ssh_options``; everything else in the inventory
is left alone.  The ssh arguments are split into words as a shell would
(``shlex``, nothing run) and each option goes through the one allowlist
(ssh_options.py): ``-o KEY=VALUE``, ``-oKEY=VALUE`` and a few flags that set
an allowed option; a refused one is named with the inventory file and its
variable.  The merged scenario is then validated like any other, so a bad
address is refused before anything runs, naming the inventory file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sanlab.scenarios.errors import Problem, ScenarioError
from sanlab.scenarios.ssh_options import options_from_args
from sanlab.scenarios.yamlfile import load_yaml

# Inventory variable -> the scenario host field it feeds.
REACH = {"ansible_port": "port", "ansible_ssh_private_key_file": "identity"}
MAX_DEPTH = 16  # groups nest; a deeper inventory is a loop or a typo


def _refuse(source: Path, where: str, message: str) -> ScenarioError:
    return ScenarioError([Problem(str(source), where, message)])


def _mapping(value: Any, source: Path, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _refuse(source, where, f"is {type(value).__name__}, expected a mapping")
    return value


def machines(source: Path) -> dict[str, dict[str, Any]]:
    """Every host of the inventory with its variables, groups' variables merged in."""
    data = _mapping(load_yaml(source), source, "")
    if "all" not in data:
        data = {"all": {"children": data}}  # top-level groups, as ansible-inventory also accepts
    found: dict[str, dict[str, Any]] = {}
    _walk(_mapping(data["all"], source, "all"), {}, source, "all", found, 0)
    return found


def _walk(
    group: dict[str, Any], inherited: dict[str, Any], source: Path, where: str, found: dict, depth: int
) -> None:
    if depth > MAX_DEPTH:
        raise _refuse(source, where, f"groups nest more than {MAX_DEPTH} deep")
    unknown = sorted(set(group) - {"hosts", "children", "vars"})
    if unknown:
        raise _refuse(source, f"{where}.{unknown[0]}", "unknown group key (allowed: hosts, children, vars)")
    here = inherited | _mapping(group.get("vars"), source, f"{where}.vars")
    for name, own in _mapping(group.get("hosts"), source, f"{where}.hosts").items():
        found[str(name)] = found.get(str(name), {}) | here | _mapping(own, source, f"{where}.hosts.{name}")
    for name, child in _mapping(group.get("children"), source, f"{where}.children").items():
        _walk(
            _mapping(child, source, f"{where}.children.{name}"),
            here,
            source,
            f"{where}.{name}",
            found,
            depth + 1,
        )


# Inventory variables of ssh arguments, as Ansible passes them (common first, then extra).
SSH_ARGS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")


def reach(variables: dict[str, Any], name: str, source: Path) -> dict[str, Any]:
    """The scenario host fields (ssh, port, identity, ssh_options) an inventory host's
    variables give."""
    address = str(variables.get("ansible_host", name))
    user = variables.get("ansible_user")
    fields: dict[str, Any] = {"ssh": f"{user}@{address}" if user else address}
    for variable, field in REACH.items():
        if variable in variables:
            fields[field] = variables[variable]
    options = []
    for variable in SSH_ARGS:
        if variable in variables:
            try:
                options += options_from_args(variables[variable])
            except ValueError as exc:
                raise _refuse(source, f"{name}.{variable}", str(exc)) from None
    if options:
        fields["ssh_options"] = options
    return fields


def apply(scenario: dict[str, Any], source: Path) -> dict[str, Any]:
    """``scenario`` (parsed YAML) with each host's ssh fields taken from the inventory ``source``."""
    known = machines(source)
    hosts = scenario.get("hosts")
    if not isinstance(hosts, list):
        return scenario  # the scenario's own validation says what is wrong
    merged = []
    for i, host in enumerate(hosts):
        name = host.get("name") if isinstance(host, dict) else None
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise _refuse(source, f"hosts[{i}]", f"has no host {name!r} of the scenario (hosts: {listed})")
        merged.append(dict(host) | reach(known[name], name, source))
    return dict(scenario) | {"hosts": merged}

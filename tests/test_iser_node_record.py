"""No SendTargets discovery over iSER, for any stack (targets/iscsi_initiator.py, ``find_script``).

iscsiadm (open-iscsi 2.1.8) loses a Text Response that arrives over iSER before the kernel's
reply to its own send, times out after 30 s and crashes on the retry; under ``-icount`` LIO
over rxe answered that early every time (models/data/paths/README.md has the debug trace).
A node record made by hand logs in at once, so an iSER login never discovers; TCP still does.
"""

from __future__ import annotations

import pytest

from sanlab.targets.dryrun import DryRunHost
from sanlab.targets.iscsi_initiator import Session, find_script, iface_name, logged_in
from support import REPO

PORTAL = "192.0.2.1:3260"
IQN = "iqn.2026-11.org.sanlab:lio-iser-rxe"


def _sent(iser: bool) -> str:
    host = DryRunHost("initiator")
    with logged_in(host, Session(IQN, "iqn.2026-11.org.sanlab:initiator.initiator", iser=iser), PORTAL):  # type: ignore[arg-type]
        pass
    return "\n".join(host.commands)


def test_an_iser_login_makes_its_node_record_by_hand_and_never_discovers():
    sent = _sent(iser=True)
    assert "-m discovery" not in sent and "sendtargets" not in sent
    assert f"iscsiadm -m node -T {IQN} -p {PORTAL} -I {iface_name(IQN)} -o new" in sent
    assert f"iscsiadm -m node -T {IQN} -p {PORTAL} -I {iface_name(IQN)} --login" in sent


def test_a_tcp_login_still_finds_its_target_by_sendtargets():
    sent = _sent(iser=False)
    assert f"iscsiadm -m discovery -t sendtargets -p {PORTAL} -I {iface_name(IQN)}" in sent
    assert not [line for line in sent.splitlines() if "-m node" in line and "-o new" in line]


@pytest.mark.parametrize("iser", [True, False])
def test_the_record_is_found_for_the_portal_and_iface_of_the_login(iser):
    script = find_script(Session(IQN, "iqn.x:i", iser=iser), PORTAL)
    assert f"-p {PORTAL}" in script and f"-I {iface_name(IQN)}" in script


def test_no_other_module_spells_a_sendtargets_discovery():
    """find_script is the one place that decides; a discovery written anywhere else bypasses it."""
    folders = ("cli", "scenarios", "emulator", "targets", "dissectors", "models", "vm-images", "benchmarks")
    code = [p for d in folders for p in (REPO / d).rglob("*.py")]
    spelled = [p.relative_to(REPO) for p in code if "sendtargets" in p.read_text(errors="replace")]
    assert [str(p) for p in spelled] == ["targets/iscsi_initiator.py"]

"""How the runner consults the link doctor after a target failed (``link_doctor.consult``).

The doctor here is a stand-in for ``Lab``, written down step by step: the
case it stands for (a guest kernel so wedged that its agent stops answering)
takes minutes of agent timeouts to bring about in real VMs, while the
runner's part, what it asks and what the records then say, is this.
``tests/test_emulator_pairs.py`` drives the real ``Lab`` through every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sanlab.scenarios.errors import HostDown, SanlabError
from sanlab.scenarios.results.records import ResultRecord
from sanlab.targets import point_run
from sanlab.targets.sessions import link_doctor


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str


@dataclass
class WedgedGuest:
    """A doctor whose check cannot reach a guest, and whose restart reboots it."""

    revives: bool
    asked: list[str] = field(default_factory=list)

    def check_link(self, link: str) -> Health:
        self.asked.append(f"check {link}")
        raise SanlabError("target: no answer from the agent within 40 s\nmore lines")

    def restart_link(self, link: str, say: link_doctor.Say) -> Health:
        self.asked.append(f"restart {link}")
        say("next: reboot of initiator and target")
        if self.revives:
            return Health(True, "reboot: initiator -> 169.254.10.2: answers")
        return Health(False, "reboot failed: initiator did not boot again within 180 s")

    def reboot_link_hosts(self, link: str, say: link_doctor.Say) -> None:
        raise AssertionError("a link that cannot be checked is restarted, not only its hosts rebooted")


@dataclass
class HealthyLink:
    """A doctor whose link answers; it reboots the link's hosts when asked (or fails to)."""

    reboot_fails: bool = False
    asked: list[str] = field(default_factory=list)

    def check_link(self, link: str) -> Health:
        self.asked.append(f"check {link}")
        return Health(True, "initiator -> 169.254.11.2: answers")

    def restart_link(self, link: str, say: link_doctor.Say) -> Health:
        raise AssertionError("a link that answers is not restarted")

    def reboot_link_hosts(self, link: str, say: link_doctor.Say) -> None:
        self.asked.append(f"reboot hosts of {link}")
        say("initiator: rebooted, ready in 19.8 s")
        if self.reboot_fails:
            raise SanlabError("initiator did not boot again within 180 s")


def _failed() -> ResultRecord:
    return ResultRecord(
        mode="emulated", transport="nvme-rdma", fabric="roce", target_stack="nvmet", mtu=1500,
        rw="randwrite", bs=4096, iodepth=4, numjobs=1, verify="fail", error="fio exit 1",
    )  # fmt: skip


def _passed() -> ResultRecord:
    return _failed().model_copy(update={"error": None, "verify": "pass", "iops": 900.0})


def test_a_guest_that_cannot_be_checked_is_restarted_and_the_target_run_again():
    doctor, heard, withdrawn = WedgedGuest(revives=True), [], []
    records = link_doctor.consult(
        doctor, "roce", "nvmet-rdma-rxe", [_failed()], lambda: [_passed()], heard.append,
        lambda: withdrawn.append(True),
    )  # fmt: skip
    assert doctor.asked == ["check roce", "restart roce"]
    assert [r.error for r in records] == [None] and withdrawn == [True]
    note = records[0].note or ""
    assert "could not be checked: target: no answer from the agent within 40 s" in note, note
    assert "revived by reboot" in note and "fio exit 1" in note, note
    assert "nvmet-rdma-rxe: next: reboot of initiator and target" in heard, heard


def test_a_rerun_records_own_note_follows_why_it_ran_again():
    """A rerun point's own note (I/O that came back and stopped again) is kept after the
    doctor's, not overwritten by it."""
    stalled = "I/O came back 0.22 s after the fault, then stopped for 14.80 s from 0.40 s after it"
    rerun = _passed().model_copy(update={"note": stalled})
    records = link_doctor.consult(
        WedgedGuest(revives=True), "roce", "nvmet-rdma-rxe", [_failed()], lambda: [rerun], lambda m: None,
        lambda: None,
    )  # fmt: skip
    note = records[0].note or ""
    assert "revived by reboot" in note and note.endswith(f"; {stalled}"), note
    assert point_run.outcome(records[0]).endswith(f"; {note}")


def test_a_guest_no_reboot_revives_keeps_its_error_with_every_step_said():
    doctor, withdrawn = WedgedGuest(revives=False), []
    records = link_doctor.consult(
        doctor, "roce", "nvmet-rdma-rxe", [_failed()], lambda: [_passed()], lambda m: None,
        lambda: withdrawn.append(True),
    )  # fmt: skip
    assert withdrawn == []  # nothing ran again
    error = records[0].error or ""
    assert error.startswith("fio exit 1\n  link roce stalled and did not come back"), error
    assert "did not boot again within 180 s" in error, error


@dataclass
class DeadGuest:
    """A doctor whose check finds a guest whose QEMU exited (a kernel panic ends it)."""

    asked: list[str] = field(default_factory=list)

    def check_link(self, link: str) -> Health:
        self.asked.append(f"check {link}")
        raise HostDown("target: the VM is down (qemu exited with 0); last console lines: Kernel panic")

    def restart_link(self, link: str, say: link_doctor.Say) -> Health:
        raise AssertionError("a host that is down is not restarted: no down/up, NIC reset or reboot helps")

    def reboot_link_hosts(self, link: str, say: link_doctor.Say) -> None:
        raise AssertionError("a host that is down is not rebooted")


def test_a_guest_that_is_down_is_said_once_and_not_restarted():
    doctor, heard, withdrawn = DeadGuest(), [], []
    (record,) = link_doctor.consult(
        doctor, "roce", "nvmet-tcp", [_failed()], lambda: [_passed()], heard.append,
        lambda: withdrawn.append(True),
    )  # fmt: skip
    assert doctor.asked == ["check roce"] and withdrawn == []
    said = "link roce not restarted: target: the VM is down (qemu exited with 0)"
    assert record.error == f"fio exit 1\n  {said}"
    assert heard == [f"nvmet-tcp: {said}"]


STUCK = "\n  initiator still stuck in kernel: iscsid (D): iscsi_iser_ep_poll [ib_iser] <- iscsi_if_rx"


def _failed_io() -> ResultRecord:
    """A point whose I/O ran and failed: fio gave its figures, errors included."""
    return _failed().model_copy(update={"iops": 350.0, "io_errors": 12, "error": "fio exit 1, 12 I/O errors"})


def _consult_healthy(
    doctor: HealthyLink, stuck: str, heard: list[str], failed: ResultRecord | None = None
) -> tuple[list[ResultRecord], list[bool]]:
    withdrawn: list[bool] = []
    records = link_doctor.consult(
        doctor, "iwarp", "tgt-iser-siw", [failed or _failed_io()], lambda: [_passed()], heard.append,
        lambda: withdrawn.append(True), lambda: stuck,
    )  # fmt: skip
    return records, withdrawn


def test_a_failure_on_a_healthy_link_that_left_tasks_stuck_reboots_the_hosts_and_stands():
    """The failure of I/O that ran is the stack's and stays; the reboot only spares the
    targets after it."""
    doctor, heard = HealthyLink(), []
    (record,), withdrawn = _consult_healthy(doctor, STUCK, heard)
    assert doctor.asked == ["check iwarp", "reboot hosts of iwarp"] and withdrawn == []
    error = record.error or ""
    assert error.startswith("fio exit 1, 12 I/O errors\n  link iwarp answered afterwards"), error
    assert "iscsid (D): iscsi_iser_ep_poll" in error and "the hosts were rebooted" in error, error
    assert record.note is None  # nothing ran again
    assert "tgt-iser-siw: initiator: rebooted, ready in 19.8 s" in heard, heard


def test_a_target_that_failed_before_its_io_runs_again_on_the_rebooted_hosts():
    """An export or login that hung in what earlier targets left in the kernel measured
    nothing of this target: after the reboot it runs once more, and its record says why."""
    doctor, heard = HealthyLink(), []
    login = _failed().model_copy(update={"error": "initiator: iSCSI login failed (exit 139)"})
    (record,), withdrawn = _consult_healthy(doctor, STUCK, heard, login)
    assert doctor.asked == ["check iwarp", "reboot hosts of iwarp"] and withdrawn == [True]
    assert record.error is None and record.verify == "pass"
    note = record.note or ""
    assert note.startswith("first attempt failed before its I/O began, on link iwarp, which answered"), note
    assert note.endswith("the hosts were rebooted: initiator: iSCSI login failed (exit 139)"), note
    assert "tgt-iser-siw: it failed before its I/O began; running tgt-iser-siw once more" in " ".join(heard)


def test_a_setup_failure_that_left_nothing_stuck_is_not_run_again():
    """Without stuck tasks there was no reboot, and nothing would be different a second time."""
    doctor = HealthyLink()
    login = _failed().model_copy(update={"error": "initiator: iSCSI login failed (exit 24)"})
    (record,), withdrawn = _consult_healthy(doctor, "", [], login)
    assert doctor.asked == ["check iwarp"] and withdrawn == []
    assert record.error == "initiator: iSCSI login failed (exit 24)\n  link iwarp answered afterwards"


def test_a_failure_on_a_healthy_link_that_left_nothing_stuck_reboots_nothing():
    doctor = HealthyLink()
    (record,), _ = _consult_healthy(doctor, "", [])
    assert doctor.asked == ["check iwarp"]
    assert record.error == "fio exit 1, 12 I/O errors\n  link iwarp answered afterwards"


def test_a_reboot_that_fails_is_said_in_the_error_and_nothing_runs_again():
    (record,), withdrawn = _consult_healthy(HealthyLink(reboot_fails=True), STUCK, [], _failed())
    assert "rebooting the hosts failed: initiator did not boot again within 180 s" in (record.error or "")
    assert withdrawn == []


@dataclass
class NamedHost:
    """Only a name: what each look at its kernel finds is scripted below."""

    name: str = "initiator"


def test_only_tasks_stuck_on_both_looks_count(monkeypatch):
    """A task caught on its way through (a, then c) is not left behind; b, on both looks, is."""
    looks = {
        "initiator": [["a (D): x [siw]", "b (S): y [rdma_cm]"], ["b (S): y [rdma_cm]", "c (D): z [nvme_tcp]"]]
    }
    monkeypatch.setattr(link_doctor.kernel_stacks, "snapshot", lambda host: looks[host.name].pop(0))
    monkeypatch.setattr(link_doctor.time, "sleep", lambda seconds: None)
    found = link_doctor.still_stuck(NamedHost())
    assert found == "\n  initiator still stuck in kernel: b (S): y [rdma_cm]"

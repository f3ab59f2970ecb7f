"""A dead guest's last words: the oops in its console log, in one line (emulator/panics.py).

The fixtures are real console logs of guests whose kernels panicked in
sanlab runs: three Debian 13 (6.12) guests during SRP over rxe, one of them
in fio's own system call, and a Debian 12 (6.1) initiator in iSER.  The
three 6.12 oopses saved flags no x86-64 CPU can hold, and their lines say
that the emulator, not the kernel, is to blame (emulator/cpuflags.py).
"""

from __future__ import annotations

import time

import pytest

from sanlab.emulator.panics import find_oops, last_words, read_tail
from support import REPO

PANICS = REPO / "tests" / "data" / "panics"
EMULATOR = (
    "; its flags {} hold bits no x86-64 CPU can set: the emulator corrupted the guest's state "
    "(QEMU 7.2's TCG does; emulator/README.md)"
)


@pytest.mark.parametrize(
    "log,expected",
    [
        (
            "rxe-ack-double-fault-6.12.console.log",
            "kernel panicked: double fault in kmem_cache_alloc_node_noprof (Linux 6.12.117+deb13-amd64, "
            "task kworker/u4:0, workqueue rxe_wq), called from rxe_init_packet [rdma_rxe] "
            "<- prepare_ack_packet [rdma_rxe] <- send_common_ack.isra.0 [rdma_rxe]"
            + EMULATOR.format("7e023702"),
        ),
        (
            # The fault is in an interrupt; the driver that ran when it came is in the task's frames.
            "net-rx-null-6.12.console.log",
            "kernel panicked: kernel NULL pointer dereference in net_rx_action (Linux 6.12.117+deb13-amd64, "
            "task kworker/u4:7, workqueue rxe_wq), called from rxe_xmit_packet [rdma_rxe] "
            "<- rxe_requester [rdma_rxe] <- rxe_sender [rdma_rxe]" + EMULATOR.format("bffc9483"),
        ),
        (
            # No module on the way: the first certain frames of the core kernel.
            "fio-dentry-double-fault-6.12.console.log",
            "kernel panicked: double fault in kmem_cache_alloc_lru_noprof (Linux 6.12.117+deb13-amd64, "
            "task fio), called from __d_alloc <- d_alloc_parallel <- __lookup_slow"
            + EMULATOR.format("81768282"),
        ),
        (
            "iser-null-6.1.console.log",
            "kernel panicked: kernel NULL pointer dereference in iscsi_complete_pdu [libiscsi] "
            "(Linux 6.1.0-50-amd64, task ksoftirqd/0), called from iscsi_iser_recv [ib_iser] "
            "<- iser_task_rsp [ib_iser] <- __ib_process_cq [ib_core]",
        ),
    ],
)
def test_a_real_oops_is_told_in_one_line(log, expected):
    oops = find_oops((PANICS / log).read_text(errors="replace"))
    assert oops is not None and oops.line() == expected
    words = last_words(PANICS / log)
    assert words == f"its {expected}; the whole oops is in {log}" and "\n" not in words


def test_only_the_first_oops_counts(tmp_path):
    """A second oops (a task dying after the first) says less than the one that began it."""
    first = (PANICS / "rxe-ack-double-fault-6.12.console.log").read_text(errors="replace")
    second = (PANICS / "iser-null-6.1.console.log").read_text(errors="replace")
    assert find_oops(first + second) == find_oops(first)


def test_a_panic_line_alone_still_names_the_panic(tmp_path):
    log = tmp_path / "target.console.log"
    log.write_text("[  104.4] Kernel panic - not syncing: Fatal exception in interrupt\n")
    assert last_words(log) == (
        "its kernel panicked: Fatal exception in interrupt; the whole oops is in target.console.log"
    )


def test_a_log_without_an_oops_gives_its_last_lines(tmp_path):
    """QEMU killed from outside leaves a log that ends mid-work: its last lines are what there is."""
    log = tmp_path / "i.console.log"
    log.write_text("one\n\ntwo\n   \nthree\nfour\n")
    assert last_words(log) == "last console lines: three | four"
    assert last_words(log, lines=1) == "last console lines: four"
    assert last_words(tmp_path / "missing.log") == ""
    (tmp_path / "empty.log").write_text("")
    assert last_words(tmp_path / "empty.log") == ""


def test_a_huge_log_is_read_from_its_tail_only(tmp_path):
    """A guest that printed 64 MiB before it died costs the tail's read, not the log's."""
    log = tmp_path / "chatty.console.log"
    oops = (PANICS / "rxe-ack-double-fault-6.12.console.log").read_bytes()
    with log.open("wb") as handle:
        handle.write(b"[    1.000000] BUG: an old report the tail does not reach\n")
        chunk = (b"x" * 79 + b"\n") * (1 << 14)  # 1.25 MiB
        for _ in range(52):
            handle.write(chunk)
        handle.write(oops)
    started = time.monotonic()
    words = last_words(log)
    assert time.monotonic() - started < 2.0
    assert "double fault in kmem_cache_alloc_node_noprof" in words
    assert len(read_tail(log)) <= 256 << 10


def test_undecodable_bytes_do_not_stop_the_reading(tmp_path):
    log = tmp_path / "t.console.log"
    log.write_bytes(b"\xff\xfe\x1b[?2004h" + (PANICS / "net-rx-null-6.12.console.log").read_bytes())
    assert "kernel NULL pointer dereference in net_rx_action" in last_words(log)


def test_a_log_that_cannot_be_read_says_nothing(tmp_path):
    """A log that is a directory (or unreadable) is no log: nothing is said, nothing raised."""
    (tmp_path / "d.console.log").mkdir()
    assert last_words(tmp_path / "d.console.log") == ""

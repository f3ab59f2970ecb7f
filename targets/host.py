"""Running scripts on a Host (scenarios/hosts.py) the way the targets layer needs.

``sh`` runs a script with ``set -e`` and names the step that failed;
``wait_for_devices`` waits for a login's block devices.
"""

from __future__ import annotations

import time

from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.hosts import Host, Result

__all__ = ["Host", "Result", "StackError", "sh", "wait_for_devices", "kernel_tail", "DRY_RUN_DEVICE"]


# What a dry run's login finds in place of the block device a real one would.
DRY_RUN_DEVICE = "<new block device>"


class StackError(SanlabError):
    """A storage stack could not be configured; says which step and why."""


def sh(host: Host, script: str, what: str, timeout: float = 120.0) -> str:
    """Run a shell script with ``set -e``; raise StackError naming ``what`` on failure."""
    result = host.run("set -e\n" + script, timeout=timeout)
    if not result.ok:
        detail = (result.stderr or result.stdout).strip().splitlines()[-6:]
        kernel = kernel_tail(host)
        why = f"no answer in {timeout:g} s" if result.timed_out else f"exit {result.rc}"
        raise StackError(
            f"{host.name}: {what} failed ({why}): "
            + " | ".join(detail)
            + (f"\n  kernel log: {kernel}" if kernel else "")
        )
    return result.stdout


def kernel_tail(host: Host, lines: int = 6) -> str:
    """The last kernel messages on one line: why a step failed is usually there."""
    return " | ".join(host.run(f"dmesg | tail -n {lines}", timeout=30).stdout.strip().splitlines())


def wait_for_devices(host: Host, script: str, what: str, timeout: float = 30.0, count: int = 1) -> list[str]:
    """Run a sysfs-listing ``script`` until it prints ``count`` device paths or more; fail
    naming ``what``.

    A login returns before the kernel has scanned the new LUN or namespace,
    so the block device appears a moment later.
    """
    if getattr(host, "dry_run", False):  # a rehearsal: the device is what the real run would find
        host.run(script, timeout=30)
        return [DRY_RUN_DEVICE]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(set(host.run(script, timeout=30).stdout.split()))
        if len(found) >= count:
            return found
        time.sleep(0.5)
    if count > 1:
        raise StackError(f"{host.name}: {what}, but {count} block devices did not appear in {timeout:.0f} s")
    raise StackError(f"{host.name}: {what}, but no block device appeared in {timeout:.0f} s")

"""dm-multipath on the initiator: one block device over a SCSI target's several sessions.

iSCSI and iSER have no multipath of their own: each path is a session,
each session a SCSI disk, and the device mapper's multipath target joins
the disks that report one LUN identifier (VPD page 0x83) into one device
that moves I/O to the paths left when one fails.  multipath-tools builds
the map and its daemon, multipathd, checks the paths (``tur``) and
reinstates a path when it answers again (failback).

Three things make it work in sanlab's guest, which runs no udev at boot:

1. multipathd creates a map and then waits for the device mapper's udev
   event before it adds a second path (``delaying path addition until ...
   is fully initialized``).  So a udevd is started, whose rules are the
   device mapper's and multipath's only (the image keeps no others).
2. Without udev's ``ID_SERIAL``, the identifier is read from sysfs
   (``uid_attribute ""``).
3. ``find_multipaths strict``: only identifiers in the wwids file become
   maps, and sanlab adds exactly those of its own targets, so no other
   disk is taken over.

Guests only: a real host's ``/etc/multipath.conf`` is its owner's, and
``validate`` refuses SCSI multipath between real machines.  On a guest a
configuration sanlab did not write is refused too, never replaced.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sanlab.scenarios.hosts import Say
from sanlab.targets.host import Host, StackError, sh

CONF = "/etc/multipath.conf"
MARK = "# written by sanlab"
# polling_interval 1: a path that answers again is reinstated within seconds
# (failback is timed too).  path_grouping_policy multibus, in overrides so
# that no built-in device entry wins: every path carries I/O, so a pulled path
# always holds some, whichever target serves it.  Left to the defaults, LIO
# (whose built-in entry groups its ALUA-optimised paths together) used both
# while tgt (no entry: one path at a time) might use only path B, and pulling
# A then timed a failover that never happened (0.01 s).
CONFIG = f"""{MARK}: SCSI multipath for sanlab's own targets only
defaults {{
    find_multipaths strict
    user_friendly_names no
    uid_attribute ""
    polling_interval 1
}}
overrides {{
    path_grouping_policy multibus
}}
"""
MODULES = ("dm_multipath", "dm_service_time", "dm_round_robin", "scsi_dh_alua")
# How long the map may take to gather every path.
JOIN_S = 60.0


def prepare(host: Host) -> None:
    """The modules, sanlab's configuration, a udevd for the device mapper and multipathd.

    The daemons stay up for the guest's life, as iscsid does; a
    configuration someone else wrote is refused.
    """
    conf = shlex.quote(CONFIG)
    sh(
        host,
        f"""
if [ -e {CONF} ] && ! grep -q {shlex.quote(MARK)} {CONF}; then
  echo "{CONF} was not written by sanlab; it is left as it is" >&2; exit 1
fi
printf %s {conf} > {CONF}
for m in {" ".join(MODULES)}; do modprobe $m; done
pidof systemd-udevd >/dev/null || /lib/systemd/systemd-udevd --daemon
pidof multipathd >/dev/null || multipathd
for i in $(seq 50); do multipathd show daemon >/dev/null 2>&1 && exit 0; sleep 0.2; done
echo "multipathd did not answer" >&2; exit 1
""",
        "starting dm-multipath (udevd, multipathd)",
    )


def identify(host: Host, disks: list[str], found: dict[str, list[str]]) -> None:
    """Put each disk under its LUN's identifier in ``found`` (first seen first), adding the
    identifier to the wwids file as it goes, so that what was added is known if one fails."""
    for disk in disks:
        out = sh(host, f"multipath -a {shlex.quote(disk)}", f"reading the identifier of {disk}")
        if _rehearsal(host):  # the identifier is whatever the real disk will report
            out = "wwid 'WWID' added"
        match = re.search(r"wwid '([^']+)'", out)
        if match is None:
            raise StackError(f"{host.name}: multipath -a {disk} named no identifier: {out.strip()}")
        found.setdefault(match.group(1), []).append(disk)


def _paths(host: Host, wwid: str) -> int:
    """How many paths multipathd has in the map ``wwid`` (0 while there is none)."""
    out = host.run(f"multipathd show maps raw format '%w %N' | grep -F {shlex.quote(wwid)}", timeout=30)
    fields = out.stdout.split()
    return int(fields[1]) if len(fields) == 2 and fields[1].isdigit() else 0


def _join(host: Host, wwid: str, disks: list[str]) -> str:
    """Add ``disks`` to multipathd and wait until the map has every one; its device."""
    adds = "; ".join(f"multipathd add path {shlex.quote(d.removeprefix('/dev/'))}" for d in disks)
    sh(host, adds, f"adding {', '.join(disks)} to multipathd")
    deadline = time.monotonic() + JOIN_S
    while not _rehearsal(host) and _paths(host, wwid) < len(disks):
        if time.monotonic() > deadline:
            raise StackError(
                f"{host.name}: the multipath map {wwid} did not gather its {len(disks)} paths "
                f"({', '.join(disks)}) within {JOIN_S:g} s"
            )
        time.sleep(0.5)
    device = f"/dev/mapper/{wwid}"
    if _rehearsal(host):
        return device
    wait = f"for i in $(seq 50); do [ -b {device} ] && exit 0; sleep 0.2; done; exit 1"
    sh(host, wait, f"waiting for {device}")
    return device


def active_paths_listing(device: str) -> str:
    """Print the major:minor of each path of the map behind ``device`` (``/dev/mapper/WWID``)
    that the device mapper has active.  ``dmsetup status`` gives each path as its
    major:minor followed by A (active) or F (failed); a path group's own state is an A
    too, so only the letter after a major:minor counts."""
    name = shlex.quote(device.removeprefix("/dev/mapper/"))
    active = '{for (i = 1; i < NF; i++) if ($i ~ /^[0-9]+:[0-9]+$/ && $(i + 1) == "A") print $i}'
    return f"dmsetup status {name} | awk {shlex.quote(active)}"


# A path the device mapper calls active may still hold I/O that never
# completes: iSER over rxe after the cable's return stayed logged in with its
# commands hung, and multipathd failed the path only 12 s later.  So a path is
# in use only when it also answers a one-block direct read within
# PATH_READ_S; a read that hangs is left to finish or fail on its own.
PATH_READ_S = 2


def active_paths_script(device: str) -> str:
    """Print how many paths of the map behind ``device`` are active and answer a read."""
    read = (
        'dev=$(basename "$(readlink -f /sys/dev/block/$mm)"); '
        '( dd if="/dev/$dev" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null && : > "$d/$mm" ) '
        ">/dev/null 2>&1 &"
    )
    wait = (
        f'for i in $(seq {PATH_READ_S * 10}); do [ "$(ls "$d" | wc -l)" -ge "$n" ] && break; sleep 0.1; done'
    )
    return (
        f"d=$(mktemp -d); n=0; for mm in $({active_paths_listing(device)}); do n=$((n + 1)); {read} done; "
        f'{wait}; ls "$d" | wc -l; rm -rf "$d"'
    )


def _rehearsal(host: Host) -> bool:
    """A dry run: nothing answers, so there is nothing to wait for."""
    return bool(getattr(host, "dry_run", False))


def _leave(host: Host, wwid: str, disks: list[str]) -> None:
    """Remove the map and forget the identifier (only sanlab's own: strict mode added it)."""
    paths = " ".join(shlex.quote(d.removeprefix("/dev/")) for d in disks)
    host.run(
        f"multipathd del map {shlex.quote(wwid)} >/dev/null 2>&1; "
        f"for p in {paths}; do multipathd del path $p >/dev/null 2>&1; done; "
        f"multipath -f {shlex.quote(wwid)} >/dev/null 2>&1; "
        f"multipath -w {shlex.quote(disks[0])} >/dev/null 2>&1; true",
        timeout=120,
    )


@contextmanager
def joined(host: Host, disks: list[str], say: Say = lambda m: None) -> Iterator[list[str]]:
    """One multipath device per LUN over ``disks`` (every session's disks) for the block.

    Each LUN must be seen on as many paths as the first one; the maps go
    (and their identifiers leave the wwids file) when the block ends.
    """
    prepare(host)
    groups: dict[str, list[str]] = {}
    try:
        identify(host, disks, groups)
        counts = {len(paths) for paths in groups.values()}
        if not _rehearsal(host) and (len(counts) != 1 or counts == {1}):
            raise StackError(
                f"{host.name}: the disks {', '.join(disks)} are not every LUN on each path "
                f"({', '.join(f'{w}: {len(p)}' for w, p in groups.items())})"
            )
        devices = [_join(host, wwid, paths) for wwid, paths in groups.items()]
        say(f"dm-multipath: {', '.join(devices)} over {len(disks) // len(groups)} paths each")
        yield devices
    finally:
        for wwid, paths in reversed(groups.items()):
            _leave(host, wwid, paths)

"""``sanlab blktests run``: upstream blktests' nvme and srp groups in sanlab's guests.

The nvme group runs across a wire: the initiator guest runs blktests' ``check`` with
``NVME_TARGET_CONTROL`` naming sanlab's control program (targets/blktests_guest.py), and
every target blktests asks for is made on the target guest, at the far end of the lab's
cable, by targets/blktests_relay.py, over rxe, siw (NVMe/RDMA) or TCP.  Tests that need the
kernel target in their own machine (``_require_kernel_nvme_target``, loop-only tests) skip
themselves, as blktests means them to against an external target.

The srp group builds its own target (LIO and ib_srpt) and initiator in one machine
(tests/srp/rc), so it runs in the initiator guest alone, over the rxe device on the lab's
interface: its RDMA traffic stays inside that guest, no wire.

blktests is never copied into sanlab: the user's checkout is packed here, put in the guest,
and run there, one test per ``check`` under a per-test ``timeout``.  What blktests wrote
(results/<dev>/<group>/<NNN> and the files beside them), each test's console output (where
its skip reasons are: blktests prints them, never writes them), both guests' logs and the
cable's capture go into the run folder, every file through its manifest.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import stat
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sanlab.emulator import guest_debs
from sanlab.emulator.lab import Lab, running_lab
from sanlab.emulator.lab_state import lab_name
from sanlab.scenarios.errors import SanlabError
from sanlab.scenarios.files import open_regular, read_bounded
from sanlab.scenarios.hosts import Host, Say
from sanlab.scenarios.loader import parse_scenario
from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.results.blktests import check_checkout, counts, read_results, skip_reasons
from sanlab.scenarios.results.outdir import OutputFolder, claim_fresh, copy_into
from sanlab.scenarios.schema import Scenario
from sanlab.targets import blktests_relay
from sanlab.targets.blktests_guest import SPOOL

# The wire each run goes over: (link fabric, soft-RDMA driver, sanlab transport of the nvme group).
WIRES = {
    "rxe": ("roce", "rxe", "nvme-rdma"),
    "siw": ("iwarp", "siw", "nvme-rdma"),
    "tcp": ("eth", None, "nvme-tcp"),
}
GROUPS = ("nvme", "srp")
SRP = TRANSPORTS["srp"]  # the srp group's transport: the fabrics it may run over
GUEST_CHECKOUT = "/root/blktests"
GUEST_RESULTS = "/root/blktests-results"
CHECKOUT_BYTES = 64 << 20  # blktests is about 2 MB; a checkout with build output stays far below
RESULTS_BYTES = 256 << 20  # what check writes: a few hundred short files, some logs
NAMESPACE_BYTES = 64 << 20  # NVME_IMG_SIZE: nvme/010 writes and verifies all of it under TCG
DEFAULT_TIMEOUT_S = 600
# The srp group's own helper program (tests/srp/rc: _have_src_program discontiguous-io), built
# by blktests' make; without it the whole group is 'not run'.
SRP_PROGRAM = "src/discontiguous-io"
_TEST = re.compile(r"[a-z]+/[0-9]{3}")
_PART = re.compile(r"[A-Za-z0-9_.,=+-]{1,128}")  # a results path component blktests writes


@dataclass(frozen=True)
class BlktestsPlan:
    """What a run will do, worked out before any VM boots."""

    wire: str
    group: str
    checkout: Path
    tests: tuple[str, ...]  # 'nvme/003', in order
    timeout_s: int


def plan(wire: str, group: str, checkout: Path, tests: tuple[str, ...], timeout_s: int) -> BlktestsPlan:
    """The run's plan, or one line naming the bad input and what is allowed."""
    if wire not in WIRES:
        raise SanlabError(f"wire {wire[:40]!r} is none of {', '.join(WIRES)}")
    if group not in GROUPS:
        raise SanlabError(f"--group {group[:40]!r} is none of {', '.join(GROUPS)}")
    fabric, _, _ = WIRES[wire]
    if group == SRP.name and fabric not in SRP.fabrics:
        carriers = ", ".join(w for w, (f, _, _) in WIRES.items() if f in SRP.fabrics)
        raise SanlabError(
            f"--group srp runs over {carriers} only (SRP's fabrics are {', '.join(SRP.fabrics)}: "
            f"ib_srp refuses iWARP, and TCP carries no SRP); got {wire}"
        )
    check_checkout(checkout)
    if group == SRP.name and not (checkout / SRP_PROGRAM).is_file():
        raise SanlabError(
            f"--blktests {checkout}: {SRP_PROGRAM} is not built, and the srp group needs it "
            f"(the guests have no compiler): run 'make -C {checkout / 'src'}' first"
        )
    found = sorted(
        f"{group}/{p.name}"
        for p in (checkout / "tests" / group).iterdir()
        if re.fullmatch(r"[0-9]{3}", p.name) and p.is_file() and not p.is_symlink()
    )
    chosen = found
    if tests:
        wrong = [t for t in tests if not _TEST.fullmatch(t) or t not in found]
        if wrong:
            raise SanlabError(
                f"--tests {wrong[0][:40]!r}: not a test of the {group} group in {checkout} "
                f"(give names like {found[0] if found else group + '/001'})"
            )
        chosen = [t for t in found if t in tests]
    if not 10 <= timeout_s <= 7200:
        raise SanlabError(f"--timeout {timeout_s}: give 10 to 7200 seconds per test")
    return BlktestsPlan(wire, group, checkout, tuple(chosen), timeout_s)


def wire_scenario(wire: str, capture: bool) -> Scenario:
    """Two guests joined by one cable of ``wire``'s kind, as a scenario the lab boots."""
    fabric, driver, _ = WIRES[wire]
    link: dict[str, Any] = {
        "name": "fabric",
        "endpoints": ["initiator", "target"],
        "fabric": fabric,
        "mtu": 1500,
    }
    if driver:
        link["rdma_driver"] = driver
    data = {
        "name": f"blktests-{wire}",
        "description": f"upstream blktests across one {wire} cable",
        "hosts": [{"name": "initiator", "role": "initiator"}, {"name": "target", "role": "target"}],
        "links": [link],
        "capture": capture,
    }
    return parse_scenario(data, f"blktests {wire}")


def checkout_tar(checkout: Path) -> bytes:
    """The checkout as a tar: regular files and folders only (never through a link), no .git,
    no results; at most CHECKOUT_BYTES."""
    buffer, total = io.BytesIO(), 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for root, dirs, files in os.walk(checkout, followlinks=False):
            dirs[:] = sorted(
                d for d in dirs if d not in (".git", "results") and not (Path(root) / d).is_symlink()
            )
            for name in sorted(files):
                path = Path(root) / name
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode):
                    continue
                total += info.st_size
                if total > CHECKOUT_BYTES:
                    raise SanlabError(
                        f"--blktests {checkout}: over {CHECKOUT_BYTES >> 20} MiB; not a blktests checkout?"
                    )
                member = tarfile.TarInfo(str(path.relative_to(checkout)))
                member.size, member.mode = info.st_size, 0o755 if info.st_mode & 0o100 else 0o644
                with open_regular(path, "blktests file") as handle:
                    tar.addfile(member, handle)
    return buffer.getvalue()


def results_files(data: bytes) -> list[tuple[str, bytes]]:
    """What blktests wrote, from the guest's tar of its results folder: regular files whose every
    path component is a plain name; links, devices and odd names left out, at most RESULTS_BYTES."""
    found, total = [], 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                parts = PurePosixPath(member.name).parts
                parts = parts[1:] if parts and parts[0] == "." else parts
                if (
                    not member.isfile()
                    or not parts
                    or not all(_PART.fullmatch(p) and p not in (".", "..") for p in parts)
                ):
                    continue
                total += member.size
                if total > RESULTS_BYTES:
                    raise SanlabError(f"blktests' results are over {RESULTS_BYTES >> 20} MiB")
                handle = tar.extractfile(member)
                found.append(("/".join(parts), handle.read() if handle else b""))
    except tarfile.TarError as exc:
        raise SanlabError(f"blktests' results from the guest are not a tar ({exc})") from None
    return found


@dataclass
class TestRun:
    """One ``check TEST`` in the guest: how long, how it ended, what it printed of skips."""

    test: str
    wall_s: float
    exit: int | None  # check's exit status; None when the guest never said
    timed_out: bool
    skip_reasons: list[str] = field(default_factory=list)


def _check_command(p: BlktestsPlan, test: str) -> str:
    """The spawned shell line: fixed words and checked values, each quoted."""
    _, _, transport = WIRES[p.wire]
    env = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "TERM=dumb"]
    if p.group == "nvme":
        trtype = TRANSPORTS[transport].carrier  # blktests' nvme_trtype: tcp or rdma
        env += [
            f"NVME_TARGET_CONTROL={blktests_relay.CONTROL}",
            f"NVMET_TRTYPES={trtype}",
            f"NVME_IMG_SIZE={NAMESPACE_BYTES >> 20}m",
        ]
    if p.wire == "rxe":
        env.append("USE_RXE=1")
    words = ["env", "-i", *env, "timeout", "-k", "20", str(p.timeout_s), "./check", "-o", GUEST_RESULTS, test]
    rc = shlex.quote(f"{SPOOL}/check.rc")
    return (
        f"cd {GUEST_CHECKOUT} && rm -f {rc} && {shlex.join(words)} > {SPOOL}/check.log 2>&1; "
        f"echo $? > {rc}.tmp && mv {rc}.tmp {rc}"
    )


PUT_CHUNK = 256 << 10  # the agent's socket times a send out in 1 s; a TCG guest reads a few MB/s


def put_large(host: Host, path: str, data: bytes) -> None:
    """``data`` as ``path`` in pieces the agent takes in time, joined in the guest (argv only)."""
    parts = [f"{path}.part-{n:04d}" for n in range(0, max(1, -(-len(data) // PUT_CHUNK)))]
    for n, part in enumerate(parts):
        host.put(part, data[n * PUT_CHUNK : (n + 1) * PUT_CHUNK])
    joined = host.run(
        ["sh", "-c", 'out=$1; shift; cat -- "$@" > "$out" && rm -f -- "$@"', "sh", path, *parts]
    )
    if not joined.ok:
        raise SanlabError(f"{host.name}: cannot join {path}: {joined.stderr.strip()[:200]}")


def _stage(p: BlktestsPlan, initiator: Host, traddr: str, host_traddr: str) -> None:
    """The checkout, the control program and its answers, in the initiator guest."""
    initiator.run(["rm", "-rf", "--", SPOOL, GUEST_CHECKOUT, GUEST_RESULTS], timeout=60)
    initiator.run(
        ["mkdir", "-p", f"{SPOOL}/requests", f"{SPOOL}/replies", GUEST_CHECKOUT, GUEST_RESULTS], timeout=30
    )
    put_large(initiator, f"{SPOOL}/checkout.tar", checkout_tar(p.checkout))
    unpacked = initiator.run(
        ["tar", "-x", "--no-same-owner", "-C", GUEST_CHECKOUT, "-f", f"{SPOOL}/checkout.tar"], timeout=120
    )
    if not unpacked.ok:
        raise SanlabError(f"initiator: cannot unpack the blktests checkout: {unpacked.stderr.strip()[:200]}")
    program = Path(__file__).resolve().parent.parent / "blktests_guest.py"
    source = read_bounded(program, 1 << 20, "control program")
    initiator.put(blktests_relay.CONTROL, source, mode=0o755)
    _, _, transport = WIRES[p.wire]
    document = blktests_relay.config_document(transport, traddr, host_traddr)
    initiator.put(f"{SPOOL}/config.json", json.dumps(document).encode())


def _bring_config(initiator: Host, release: str, kernel: str, say: Say) -> str:
    """The kernel's build configuration at /boot/config-KERNEL, where blktests reads which
    options are built (the srp group and nvme's auth tests skip without it); never over a file."""
    try:
        config = guest_debs.kernel_config(release, kernel, say)
    except SanlabError as exc:
        say(f"warning: {exc}; tests that read the kernel's configuration will say 'not run'")
        return f"kernel config not brought: {exc}"
    put_large(initiator, f"{SPOOL}/kernel.config", config)
    initiator.run(["cp", "-n", "--", f"{SPOOL}/kernel.config", f"/boot/config-{kernel}"], timeout=30)
    return f"/boot/config-{kernel} from linux-image-{kernel}"


def _bring_tools(initiator: Host, say: Say, kernel: str = "") -> str:
    """gawk and column, which check wants and the image lacks (emulator/guest_debs.py), unpacked
    in the guest without replacing any file of its own; what was done, for the summary."""
    line = initiator.run(["grep", "-m1", "^VERSION_CODENAME=", "/etc/os-release"], timeout=30).stdout
    release = line.strip().partition("=")[2].strip('"')
    try:
        packed = guest_debs.tools_tar(guest_debs.ready_debs(release, say))
    except SanlabError as exc:
        say(f"warning: {exc}; check runs without them (its console table is not printed)")
        return f"not brought: {exc}"
    put_large(initiator, f"{SPOOL}/tools.tar", packed)
    unpacked = initiator.run(
        ["tar", "-x", "--skip-old-files", "-C", "/", "-f", f"{SPOOL}/tools.tar"], timeout=60
    )
    if not unpacked.ok:
        raise SanlabError(f"initiator: cannot unpack the tools: {unpacked.stderr.strip()[:200]}")
    initiator.run(["ldconfig"], timeout=60)
    packages = ", ".join(guest_debs.PACKAGES[release])
    brought = f"gawk, column and killall from Debian {release}'s packages ({packages})"
    return brought + ("; " + _bring_config(initiator, release, kernel, say) if kernel else "")


def _serve(
    p: BlktestsPlan, initiator: Host, relay: blktests_relay.Relay | None, say: Say
) -> tuple[int | None, bool]:
    """Relay requests until ``check`` ends or outlives its timeout; (exit status, timed out)."""
    deadline = time.monotonic() + p.timeout_s + 60
    while time.monotonic() < deadline:
        answer = initiator.run(blktests_relay.wait_script(5), timeout=30)
        first, _, body = answer.stdout.partition("\n")
        if first.startswith("done "):
            status = first.removeprefix("done ").strip()
            return (int(status) if status.isdigit() else None), status in ("124", "137")  # timeout's
        if first.startswith("request ") and relay is not None:
            _answer(initiator, relay, first.removeprefix("request ").strip(), body, say)
        elif first.startswith("request "):
            raise SanlabError("the srp group asked the nvme target control: not a run this relay serves")
    return None, True


def _answer(initiator: Host, relay: blktests_relay.Relay, name: str, body: str, say: Say) -> None:
    try:
        request = blktests_relay.read_request(name, body)
    except SanlabError as exc:
        say(f"  refused: {exc}")
        initiator.run(["rm", "-f", "--", f"{SPOOL}/requests/{name}"], timeout=30)
        seq = name.removesuffix(".json")
        if re.fullmatch(r"[0-9]{20,40}", seq):
            _reply(initiator, f"{SPOOL}/replies/{seq}.json", 2, str(exc))
        return
    rc, said = relay.handle(request)
    say(f"  {request.verb} {request.values['subsysnqn']}: {'ok' if rc == 0 else said}")
    initiator.run(["rm", "-f", "--", blktests_relay.request_path(request)], timeout=30)
    _reply(initiator, blktests_relay.reply_path(request), rc, said)


def _reply(initiator: Host, path: str, rc: int, said: str) -> None:
    """The reply under a name the control program ignores, then renamed whole: it reads and
    removes the reply as soon as the name appears (the agent's chmod after its write once found
    it gone, and a half-written reply would read as no JSON)."""
    temporary = path.replace("/replies/", "/replies/.", 1) + ".tmp"
    initiator.put(temporary, json.dumps({"rc": rc, "said": said}).encode())
    initiator.run(["mv", "-f", "--", temporary, path], timeout=30)


def _keep_results(initiator: Host, folder: OutputFolder) -> None:
    packed = initiator.run(["tar", "-c", "-f", f"{SPOOL}/results.tar", "-C", GUEST_RESULTS, "."], timeout=120)
    if not packed.ok:
        raise SanlabError(f"initiator: cannot pack blktests' results: {packed.stderr.strip()[:200]}")
    for name, data in results_files(initiator.get(f"{SPOOL}/results.tar")):
        folder.write_bytes(f"results/{name}", data)


def _one_test(
    p: BlktestsPlan, test: str, lab: Lab, relay: blktests_relay.Relay | None, folder: OutputFolder, say: Say
) -> TestRun:
    initiator = lab.vms["initiator"]
    started = time.monotonic()
    # Gone before the spawn returns: the spawned line removes it too, but the first wait can
    # come sooner and take the last test's exit for this one's.
    initiator.run(["rm", "-f", "--", f"{SPOOL}/check.rc"], timeout=30)
    initiator.spawn(_check_command(p, test))
    status, timed_out = _serve(p, initiator, relay, say)
    wall = time.monotonic() - started
    log = initiator.run(["cat", f"{SPOOL}/check.log"], timeout=30).stdout
    folder.write_text(f"logs/check-{test.replace('/', '-')}.log", log)
    if relay is not None and relay.live:  # what blktests did not clean up: its controllers, then the exports
        for nqn in sorted(relay.live):
            initiator.run(["nvme", "disconnect", "-n", nqn], timeout=60)
        say(f"  {test}: removed what it left: {', '.join(relay.close())}")
    _keep_results(initiator, folder)
    reasons = sorted({r for rs in skip_reasons(log).values() for r in rs})
    return TestRun(test, round(wall, 1), status, timed_out, reasons)


def run(
    p: BlktestsPlan, out: Path, force: bool, say: Say, capture: bool = True, snaplen: int = 256
) -> dict[str, Any]:
    """Boot the pair, run each planned test, keep everything in ``out``; the summary written."""
    folder = claim_fresh(out, "--out", force)
    scenario = wire_scenario(p.wire, capture)
    name = lab_name(f"blktests-{p.wire}")[:20] + f"-{os.getpid()}"
    if capture:
        folder.claim("fabric.pcap")
    runs: list[TestRun] = []
    kernel, tools, started = "", "", time.monotonic()
    with running_lab(scenario, name, say, out if capture else None, keep_logs=False, snaplen=snaplen) as lab:
        ends = lab.blueprint.addresses
        traddr, host_traddr = ends[("fabric", "target")], ends[("fabric", "initiator")]
        kernel = lab.vms["initiator"].run(["uname", "-r"], timeout=30).stdout.strip()
        _stage(p, lab.vms["initiator"], traddr, host_traddr)
        tools = _bring_tools(lab.vms["initiator"], say, kernel)
        _, _, transport = WIRES[p.wire]
        relay = (
            blktests_relay.Relay(lab.vms["target"], transport, traddr, NAMESPACE_BYTES)
            if p.group == "nvme"
            else None
        )
        try:
            for test in p.tests:
                say(f"{test} over {p.wire}")
                one = _one_test(p, test, lab, relay, folder, say)
                runs.append(one)
                say(f"  {test}: exit {one.exit}{' (timed out)' if one.timed_out else ''}, {one.wall_s:.0f} s")
                _write_summary(p, folder, runs, (kernel, tools), time.monotonic() - started)
        finally:
            if relay is not None:
                relay.close()
            _collect_logs(lab, folder)
    if capture:
        folder.stamp(["fabric.pcap"])
    return _write_summary(p, folder, runs, (kernel, tools), time.monotonic() - started)


def _collect_logs(lab: Lab, folder: OutputFolder) -> None:
    for vm in lab.vms.values():
        with contextlib.suppress(SanlabError):  # a guest that died has no dmesg to give
            folder.write_text(f"logs/{vm.name}.dmesg", vm.run("dmesg", timeout=30).stdout)
        if vm.console_log.exists():
            copy_into(folder, vm.console_log, f"logs/{vm.console_log.name}")


SUMMARY = "blktests.json"


def _write_summary(
    p: BlktestsPlan, folder: OutputFolder, runs: list[TestRun], guest: tuple[str, str], wall: float
) -> dict[str, Any]:
    """blktests.json: the plan, each check's wall time and end, blktests' own results read back
    with the results parser, their counts and the skip reasons grouped."""
    results = read_results(folder.root / "results", "results") if (folder.root / "results").is_dir() else []
    grouped: dict[str, int] = {}
    for one in runs:
        for reason in one.skip_reasons:
            grouped[reason] = grouped.get(reason, 0) + 1
    document = {
        "wire": p.wire,
        "group": p.group,
        "checkout": str(p.checkout),
        "timeout_s": p.timeout_s,
        "kernel": guest[0],
        "tools": guest[1],
        "wall_s": round(wall, 1),
        "tests": [asdict(r) for r in runs],
        "results": [asdict(r) for r in results],
        "counts": counts(results),
        "skip_reasons": dict(sorted(grouped.items(), key=lambda kv: (-kv[1], kv[0]))),
        "timed_out": [r.test for r in runs if r.timed_out],
    }
    folder.write_text(SUMMARY, json.dumps(document, indent=2) + "\n")
    return document

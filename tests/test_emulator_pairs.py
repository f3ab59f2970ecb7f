"""Two VMs on one soft-RDMA link, under TCG: the emulator's acceptance tests.

Each pair boots once per module; the tests then check the RDMA device, run
real verbs and RDMA/CM traffic across the link, measure MTU, delay and rate,
and finally that teardown leaves no qemu behind.
"""

from __future__ import annotations

import re
import time

import pytest
import yaml

from sanlab.emulator.lab import running_lab
from sanlab.emulator.processes import pid_alive
from sanlab.scenarios.loader import parse_scenario
from sanlab.targets.sessions import matrix
from support import SCENARIOS

pytestmark = pytest.mark.vm


def _scenario(name: str, **link_changes: object):
    data = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())
    data["links"][0].update(link_changes)
    return parse_scenario(data, f"{name}.yaml")


@pytest.fixture(scope="module", params=["rxe", "siw"])
def pair(request, guest_image):
    """pair-rxe / pair-siw with a shaped link: 2 ms each way, 50 Mbit/s, MTU 4000."""
    driver = request.param
    scenario = _scenario(f"pair-{driver}", mtu=4000, delay="2ms", rate="50mbit")
    with running_lab(scenario, f"test-pair-{driver}", print, keep_logs=False) as lab:
        yield driver, lab
        pids = [vm.pid for vm in lab.vms.values()]
    for pid in pids:
        assert not pid_alive(pid), f"qemu {pid} outlived its lab"


def test_rdma_link_is_active_on_both_hosts(pair):
    driver, lab = pair
    for vm in lab.vms.values():
        out = vm.run("rdma link show", timeout=30).check().stdout
        assert re.search(rf"link {driver}_fabric/1 state ACTIVE .*netdev fabric", out), out


def wait_until(host, probe: str) -> None:
    """Poll a shell probe on ``host`` (a server listening, say) for up to a minute."""
    host.run(f"for i in $(seq 120); do {probe} && exit 0; sleep 0.5; done; exit 1", timeout=90).check()


# perftest turns cycles into seconds with a clock rate it measures by regression against
# gettimeofday; on a loaded TCG host the fit can fall below its r^2 of 0.9, and then it
# prints this and no report.  That is the emulated CPU's clock, not the RDMA path: such a
# run is made again, at most twice more.
CLOCK_UNMEASURED = "Correlation coefficient r^2"


def test_ib_write_bw_over_rdma_cm(pair):
    driver, lab = pair
    target, initiator = lab.vms["target"], lab.vms["initiator"]
    server_ip = lab.blueprint.addresses[("fabric", "target")]
    args = f"-R -d {driver}_fabric -s 65536 -n 200 --report_gbits"
    for _ in range(3):
        target.spawn(f"ib_write_bw {args}", log="/tmp/ib_write_bw.log")
        try:
            # A connect before the server listens is REJECTED; under load no fixed sleep
            # is enough, so wait for its RDMA CM id to be in state LISTEN.
            wait_until(target, "rdma resource show cm_id | grep -q 'LISTEN.*ib_write_bw'")
            result = initiator.run(f"ib_write_bw {args} {server_ip}", timeout=180)
        finally:  # a server left waiting holds the RDMA device, and later tests reset it
            target.run("pkill -x ib_write_bw; while pgrep -x ib_write_bw; do sleep 0.2; done", timeout=30)
        if result.ok or CLOCK_UNMEASURED not in result.stderr:
            break
    assert result.ok, result.stderr + result.stdout
    row = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("65536")]
    assert row, result.stdout
    size, iterations, _, average, rate = row[-1][:5]  # bytes, iterations, peak, average Gb/s, Mpps
    assert (int(size), int(iterations)) == (65536, 200), row[-1]  # every write was made and counted
    # RDMA rides the shaped link like any traffic: the fixture's 50 Mbit/s bounds it (its
    # payload, less the RoCE/UDP/IP headers).  A 2-second run lets the shaper's burst through
    # at line rate and perftest times it with a clock it estimated under TCG (siw measured
    # 0.0555 once), so the bound is 25 % above the rate: a figure beyond is not this link's.
    assert 0 < float(average) <= 0.05 * 1.25, row[-1]
    # The average is the message rate times the message size, not a figure of its own.
    assert float(average) == pytest.approx(float(rate) * 65536 * 8 / 1000, rel=0.05, abs=0.002), row[-1]


def test_ibv_rc_pingpong_over_rxe(pair):
    """Raw RC verbs with an out-of-band exchange; iWARP (siw) connects only through RDMA/CM."""
    driver, lab = pair
    if driver != "rxe":
        pytest.skip("iWARP sets up connections only through RDMA/CM (see test_ib_write_bw_over_rdma_cm)")
    target, initiator = lab.vms["target"], lab.vms["initiator"]
    server_ip = lab.blueprint.addresses[("fabric", "target")]
    target.spawn("ibv_rc_pingpong -d rxe_fabric -g 1 -n 200", log="/tmp/pingpong.log")
    wait_until(target, "ss -ltn | grep -q ':18515 '")  # its out-of-band TCP exchange
    result = initiator.run(f"ibv_rc_pingpong -d rxe_fabric -g 1 -n 200 {server_ip}", timeout=120)
    assert result.ok, result.stderr + result.stdout
    assert "200 iters" in result.stdout


def test_rping(pair):
    driver, lab = pair
    target, initiator = lab.vms["target"], lab.vms["initiator"]
    server_ip = lab.blueprint.addresses[("fabric", "target")]
    target.spawn(f"rping -s -a {server_ip} -C 10", log="/tmp/rping.log")
    wait_until(target, "rdma resource show cm_id | grep -q 'LISTEN.*rping'")
    result = initiator.run(f"rping -c -a {server_ip} -C 10 -v", timeout=120)
    assert result.ok, result.stderr + result.stdout
    assert result.stdout.count("ping data") == 10


def test_siw_ends_a_connection_with_a_reset_not_a_fin(pair):
    """The image's siw closes abortively (vm-images/siw-abortive-close.patch), as iscsi_tcp and
    nvme-tcp do: a closed connection's unsent bytes are dropped, never sent when a cable returns
    (the ghost writes of targets/README.md).  Upstream siw would end rping's connection with FINs."""
    driver, lab = pair
    if driver != "siw":
        pytest.skip("rxe carries RDMA over UDP: there is no TCP connection to close")
    target, initiator = lab.vms["target"], lab.vms["initiator"]
    assert initiator.run("cat /sys/module/siw/parameters/abortive_close").check().stdout.strip() == "Y"
    server_ip = lab.blueprint.addresses[("fabric", "target")]
    ends = "tcp port 7174 and tcp[tcpflags] & (tcp-fin|tcp-rst) != 0"  # rping's port
    dump = initiator.spawn(f"exec tcpdump -i fabric -n -U -w /tmp/close.pcap '{ends}'", log="/tmp/close.log")
    wait_until(initiator, "grep -q 'listening on' /tmp/close.log")
    target.spawn(f"rping -s -a {server_ip} -C 3", log="/tmp/rping-close.log")
    wait_until(target, "rdma resource show cm_id | grep -q 'LISTEN.*rping'")
    initiator.run(f"rping -c -a {server_ip} -C 3", timeout=120).check()
    time.sleep(1)  # the last segments reach tcpdump
    # Until tcpdump has written its file and exited.  SIGTERM, not SIGINT, which what the agent
    # spawns ignores; and not ``kill -0`` to wait: the agent reaps what it spawned only at its
    # next command, and a zombie answers kill -0.  (This waited out its 30 s, unchecked.)
    running = f"grep -qs '^State:[[:space:]]*[^Z[:space:]]' /proc/{dump}/status"
    initiator.run(f"kill -TERM {dump}; while {running}; do sleep 0.1; done", timeout=30).check()
    flags = initiator.run("tcpdump -r /tmp/close.pcap -n", timeout=30).check().stdout
    assert "Flags [R" in flags and "Flags [F" not in flags, flags


# What the link does, not the RDMA device on it (tc's MTU, delay and rate, a stalled or pulled
# cable, a rerun over NVMe/TCP), is the same virtio NIC under both drivers: checked once, on rxe.
ONE_DRIVER = pytest.mark.parametrize("pair", ["rxe"], indirect=True)


@ONE_DRIVER
def test_mtu_takes_effect(pair):
    _, lab = pair
    peer = lab.blueprint.addresses[("fabric", "target")]
    initiator = lab.vms["initiator"]
    assert "mtu 4000" in initiator.run("ip link show dev fabric").check().stdout
    fits = initiator.run(f"ping -c 1 -W 5 -M do -s {4000 - 28} {peer}", timeout=30)
    too_big = initiator.run(f"ping -c 1 -W 5 -M do -s {4000 - 27} {peer}", timeout=30)
    assert fits.ok, fits.stdout + fits.stderr
    assert not too_big.ok


@ONE_DRIVER
def test_delay_takes_effect(pair):
    _, lab = pair
    peer = lab.blueprint.addresses[("fabric", "target")]
    out = lab.vms["initiator"].run(f"ping -c 5 -i 0.3 {peer}", timeout=60).check().stdout
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    assert len(rtts) == 5
    assert min(rtts) >= 4.0, rtts  # 2 ms each way


@ONE_DRIVER
def test_rate_takes_effect(pair):
    _, lab = pair
    target, initiator = lab.vms["target"], lab.vms["initiator"]
    peer = lab.blueprint.addresses[("fabric", "target")]
    target.spawn("iperf3 -s -1", log="/tmp/iperf3.log")
    time.sleep(1.5)
    out = initiator.run(f"iperf3 -c {peer} -t 4 -J", timeout=90).check().stdout
    import json

    mbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    assert 20 < mbps <= 55, mbps  # shaped to 50 Mbit/s


@ONE_DRIVER
def test_a_stalled_link_is_found_and_restarted(pair):
    """A cable end that stops moving packets shows up in check_link; restart_link brings it back."""
    _, lab = pair
    lab.vms["target"].run("ip link set dev fabric down", timeout=30).check()
    stalled = lab.check_link("fabric")
    assert not stalled.ok and "no answer" in stalled.detail, stalled
    revived = lab.restart_link("fabric")
    assert revived.ok and revived.detail.startswith("down/up"), revived.detail
    for vm in lab.vms.values():  # the RDMA device outlives the restart
        assert "state ACTIVE" in vm.run("rdma link show", timeout=30).stdout


def test_a_stall_that_down_up_cannot_clear_is_reset(pair):
    """A blackhole that survives down/up (a qdisc dropping everything): the NIC is reset, reconfigured."""
    driver, lab = pair
    lab.vms["target"].run("tc qdisc replace dev fabric root netem loss 100%", timeout=30).check()
    revived = lab.restart_link("fabric")
    assert revived.ok and revived.detail.startswith("NIC reset"), revived.detail
    peer = lab.blueprint.addresses[("fabric", "target")]
    out = lab.vms["initiator"].run(f"ping -c 3 -i 0.3 {peer}", timeout=60).check().stdout
    assert min(float(x) for x in re.findall(r"time=([\d.]+) ms", out)) >= 4.0, out  # shaping is back
    for vm in lab.vms.values():  # a new RDMA device on the new netdev
        out = vm.run("rdma link show", timeout=30).stdout
        assert re.search(rf"link {driver}_fabric/1 state ACTIVE .*netdev fabric", out), out


@ONE_DRIVER
def test_a_pulled_cable_drops_carrier_and_keeps_the_routes(pair):
    """QEMU's set_link, as a pulled cable: NO-CARRIER at both ends, addresses and routes stay."""
    _, lab = pair
    peer = lab.blueprint.addresses[("fabric", "target")]
    initiator = lab.vms["initiator"]
    lab.set_carrier("fabric", False)
    try:
        for vm in lab.vms.values():
            assert vm.run("cat /sys/class/net/fabric/carrier", timeout=30).stdout.strip() == "0"
        assert "169.254.10.0/24" in initiator.run("ip route show dev fabric", timeout=30).stdout
        assert not initiator.run(f"ping -c 1 -W 2 {peer}", timeout=30).ok
    finally:
        lab.set_carrier("fabric", True)
    assert lab.check_link("fabric").ok


def test_an_rdma_device_that_stopped_working_is_found_and_its_nic_reset(pair):
    """IP answers but RDMA/CM does not (here: the device is gone): check_link says so, and the
    NIC reset brings a new RDMA device that carries rping again."""
    driver, lab = pair
    lab.vms["target"].run(f"rdma link delete {driver}_fabric", timeout=60).check()
    found = lab.check_link("fabric")
    assert not found.ok and "answers; " in found.detail and "rping" in found.detail, found.detail
    revived = lab.restart_link("fabric")
    assert revived.ok and revived.detail.startswith("NIC reset"), revived.detail
    assert "rping" in revived.detail and "over" in revived.detail


@pytest.mark.long  # a guest reset under TCG takes 2-5 minutes: benchmarks/long_vm_tests.py runs it
def test_a_stall_only_a_reboot_clears_reboots_both_hosts(pair):
    """A blackhole route outlives down/up and the NIC reset (it names no device), as a wedged
    kernel would: both hosts are rebooted in their QEMU processes and set up again."""
    driver, lab = pair
    initiator = lab.blueprint.addresses[("fabric", "initiator")]
    lab.vms["target"].run(f"ip route add blackhole {initiator}/32", timeout=30).check()
    pids = {name: vm.pid for name, vm in lab.vms.items()}
    heard: list[str] = []
    pressed = time.monotonic()
    revived = lab.restart_link("fabric", heard.append)
    assert revived.ok and revived.detail.startswith("reboot: "), revived.detail
    assert "NIC reset did not help" in revived.detail, revived.detail
    assert any("next: reboot of initiator and target" in line for line in heard), heard
    assert {name: vm.pid for name, vm in lab.vms.items()} == pids  # the same QEMU processes
    for vm in lab.vms.values():
        uptime = float(vm.run("cut -d' ' -f1 /proc/uptime", timeout=30).check().stdout)
        assert uptime < time.monotonic() - pressed, (vm.name, uptime)  # a boot since the restart began
        out = vm.run("rdma link show", timeout=30).stdout
        assert re.search(rf"link {driver}_fabric/1 state ACTIVE .*netdev fabric", out), out
    assert "blackhole" not in lab.vms["target"].run("ip route", timeout=30).stdout


@pytest.mark.long  # a guest reset under TCG takes minutes: benchmarks/long_vm_tests.py runs it
def test_a_guest_whose_agent_is_silent_is_rebooted_without_the_steps_it_cannot_take(pair):
    """A wedged guest kernel answers nothing, its agent included (here the agent is stopped):
    down/up and the NIC reset would each wait out the agent, so both hosts are rebooted at once."""
    driver, lab = pair
    target = lab.vms["target"]
    target.spawn("sleep 1; kill -STOP $(pgrep -f '^python3 /usr/lib/sanlab/agent.py')")
    time.sleep(3)
    assert not target.answers(5)
    heard: list[str] = []
    started = time.monotonic()
    revived = lab.restart_link("fabric", heard.append)
    assert revived.ok and revived.detail.startswith("reboot: "), revived.detail
    assert "(before it: target: no answer from the agent within 20 s)" in revived.detail, revived.detail
    said = "link fabric: target: no answer from the agent within 20 s; next: reboot of initiator and target"
    assert heard[0] == said, heard
    assert not any("down/up" in line or "NIC reset" in line for line in heard), heard
    print(f"silent agent to a link that answers: {time.monotonic() - started:.0f} s")
    for vm in lab.vms.values():
        out = vm.run("rdma link show", timeout=30).stdout
        assert re.search(rf"link {driver}_fabric/1 state ACTIVE .*netdev fabric", out), out


@ONE_DRIVER
def test_runner_runs_a_target_again_after_its_link_is_restarted(pair, tmp_path):
    """The initiator's end is down: Connect fails at once, the doctor revives the link, the rerun passes."""
    driver, lab = pair
    data = yaml.safe_load((SCENARIOS / f"pair-{driver}.yaml").read_text())
    data["targets"] = [
        {"name": "nvme-tcp", "host": "target", "stack": "nvmet", "transport": "nvme-tcp", "size": "32m"}
    ]
    data["workloads"] = [
        {"rw": "randwrite", "bs": "4k", "iodepth": 1, "verify": "crc32c", "verify_size": "1m"}
    ]
    scenario = parse_scenario(data, f"pair-{driver}.yaml")
    lab.vms["initiator"].run("ip link set dev fabric down", timeout=30).check()
    heard: list[str] = []
    records = matrix.run(scenario, lab.vms, lab.blueprint.endpoints, tmp_path, heard.append, doctor=lab)
    assert [r.error for r in records] == [None], records
    assert records[0].verify == "pass" and records[0].iops > 0
    assert "stalled link fabric" in (records[0].note or ""), records[0].note
    assert "revived by down/up" in records[0].note, records[0].note
    assert any("running nvme-tcp once more" in line for line in heard), heard

"""The fabric VM's program: build a scenario's switches with Mininet and hold them up.

This file runs *inside* the fabric VM (Debian's python3 and mininet 2.3.0),
not on the host: the lab copies it in and starts it with the topology as
JSON.  Each switch is a Linux bridge (Mininet's ``LinuxBridge``); its ports
are the fabric VM's virtio NICs, whose other ends are the host VMs' cables,
taken in with Mininet's ``Intf``; links between switches are Mininet
``TCLink``s (veth pairs shaped by tc).  Mininet needs root and netem, which
the guest has and the host may not; that is why it runs here.

Background flows are Mininet hosts on the switches, each running iperf3
to a lab host for as long as the network is up.

When the network is up it writes ``{"ok": true, ...}`` to the ready file,
or ``{"ok": false, "error": ...}`` if building it failed, and then waits:
SIGTERM stops the network.  Usage: ``python3 mininet_fabric.py SPEC.json``.
"""

import json
import os
import signal
import subprocess
import sys
import traceback

from mininet.link import Intf, TCIntf, TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.nodelib import LinuxBridge


class Bridge(LinuxBridge):
    """A Linux bridge that takes every port it is given.

    Mininet's ``LinuxBridge`` adds only interfaces whose names contain the
    switch's (``s1-eth1``); sanlab's ports are named after their links.
    """

    def start(self, _controllers):
        self.cmd("ip link set dev", self, "down")
        self.cmd("brctl delbr", self)
        self.cmd("brctl addbr", self)
        if self.stp:
            self.cmd("brctl setbridgeprio", self, self.prio)
            self.cmd("brctl stp", self, "on")
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd("brctl addif", self, intf)
        self.cmd("ip link set dev", self, "up")


class ShapedPort(TCIntf):
    """TCIntf for storage rates: Mininet warns off rates above 1 Gb/s and ignores them."""

    bwParamMax = 800_000  # Mbit/s


def shaping(spec):
    """Mininet's TCIntf parameters from a link's shaping (absent ones are left out)."""
    params = {}
    if spec.get("bw_mbit"):
        params["bw"] = spec["bw_mbit"]
    if spec.get("delay_us"):
        params["delay"] = f"{spec['delay_us']}us"
    if spec.get("loss_pct"):
        params["loss"] = spec["loss_pct"]
    if spec.get("queue"):
        params["max_queue_size"] = spec["queue"]
    return params


def rename(mac, name, mtu):
    """The virtio NIC with ``mac`` becomes ``name`` (its link's), at ``mtu``, up."""
    for line in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines():
        if mac in line:
            current = line.split(":")[1].strip().split("@")[0]
            if current != name:
                subprocess.run(["ip", "link", "set", "dev", current, "name", name], check=True)
            subprocess.run(["ip", "link", "set", "dev", name, "mtu", str(mtu), "up"], check=True)
            return
    raise RuntimeError(f"no NIC with MAC {mac} for port {name}")


def build(spec):
    net = Mininet(switch=Bridge, controller=None, build=False, autoSetMacs=False, waitConnected=False)
    switches = {}
    for number, switch in enumerate(spec["switches"], start=1):
        switches[switch["name"]] = net.addSwitch(switch["name"], stp=switch["stp"], dpid=f"{number:x}")
    for port in spec["ports"]:
        rename(port["mac"], port["name"], port["mtu"])
        params = shaping(port)
        cls = ShapedPort if params else Intf
        cls(port["name"], node=switches[port["switch"]], **params)
    for trunk in spec["trunks"]:
        link = net.addLink(
            switches[trunk["a"]], switches[trunk["b"]], cls=TCLink, intf=ShapedPort, **shaping(trunk)
        )
        for intf in (link.intf1, link.intf2):
            intf.cmd("ip link set dev", intf, "mtu", trunk["mtu"])
    hosts = [(net.addHost(flow["name"], ip=flow["ip"]), flow) for flow in spec["flows"]]
    for host, flow in hosts:
        net.addLink(host, switches[flow["switch"]])
    net.start()
    for host, flow in hosts:
        start_flow(host, flow)
    return net


def start_flow(host, flow):
    """iperf3 from a Mininet host to its flow's server, for as long as the fabric runs.

    The server is started on its lab host while the fabric comes up, so the
    client tries again every second until it answers.
    """
    host.cmd("ip link set dev", host.defaultIntf(), "mtu", flow["mtu"])
    udp = "--udp " if flow["udp"] else ""
    client = (
        f"iperf3 --client {flow['server']} --port {flow['port']} {udp}"
        f"--bitrate {int(flow['rate_bps'])} --time 86400"
    )
    host.cmd(f"(while true; do {client}; sleep 1; done) >> /run/sanlab-fabric/{flow['name']}.log 2>&1 &")


def bridges(names):
    """Each bridge and its ports, as the kernel has them."""
    found = {}
    for bridge in names:
        found[bridge] = sorted(os.listdir(f"/sys/class/net/{bridge}/brif"))
    return found


def main(path):
    with open(path) as handle:
        spec = json.load(handle)
    setLogLevel("info")
    try:
        net = build(spec)
    except Exception:
        report = {"ok": False, "error": traceback.format_exc(limit=3)}
        net = None
    else:
        report = {"ok": True, "bridges": bridges([s["name"] for s in spec["switches"]])}
    with open(spec["ready"], "w") as handle:
        json.dump(report, handle)

    def stop(*_args):
        if net is not None:
            net.stop()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    while True:
        signal.pause()


if __name__ == "__main__":
    main(sys.argv[1])

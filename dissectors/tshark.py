"""tshark over a capture: the fields the analyser asks for, its command line, its rows streamed
one frame at a time, and what in them would be misread (no IP, cut frames, frames out of order).

This is how a capture is read, apart from what its frames mean (frames.py decodes each row):
one tshark run with sanlab's plugins, its output never held whole, and a capture the analyser
would misread refused in one line that says how to mend it.
"""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sanlab.dissectors.plugins import ANALYSER_PLUGINS, PLUGINS, tshark_args
from sanlab.scenarios.errors import SanlabError, ToolMissing
from sanlab.scenarios.ports import ISCSI_PORT, ISCSI_TCP_PORTS

INFO = "_ws.col.Info"
FIELDS = (
    "frame.number",
    "frame.time_epoch",
    "frame.len",
    "frame.cap_len",
    "ip.src",
    "ip.dst",
    "ip.id",
    "tcp.stream",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.len",
    "tcp.flags.syn",
    "tcp.flags.fin",
    "tcp.flags.reset",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.reth.r_key",
    "infiniband.mad.transactionid",
    "infiniband.cm.req.localqpn",
    "infiniband.cm.rep.localqpn",
    "srp_rdma.opcode",
    "srp_rdma.tag",
    "srp_rdma.cdb.opcode",
    "srp_rdma.cdb.lba",
    "srp_rdma.cdb.transfer_length",
    "srp_rdma.desc.len",
    "srp_rdma.desc.key",
    "iscsi.opcode",
    "iscsi.initiatortasktag",
    "iscsi.scsicommand.expecteddatatransferlength",
    "iscsi.scsidata.S",
    "scsi_sbc.opcode",
    "scsi_sbc.rdwr10.lba",
    "scsi_sbc.rdwr16.lba",
    "scsi_sbc.rdwr10.xferlen",
    "scsi_sbc.rdwr12.xferlen",
    "iser.write_stag",
    "iser.read_stag",
    "sanlab_iser.iscsi.opcode",
    "sanlab_iser.iscsi.itt",
    "sanlab_iser.iscsi.edtl",
    "sanlab_iser.scsi.opcode",
    "sanlab_iser.scsi.lba",
    "sanlab_iser.scsi.transfer_length",
    "sanlab_iser.write_stag",
    "sanlab_iser.read_stag",
    "nvme.cmd.opc",
    "nvme.cmd.cid",
    "nvme.cmd.nsid",
    "nvme.cmd.slba",
    "nvme.cmd.nlb",
    "nvme.cmd.sgl1.len",
    "nvme.cmd.sgl1.key",
    "nvme.cqe.cid",
    "nvme.fabrics.cmd.cid",
    "nvme.fabrics.cmd.fctype",
    "nvme-rdma.cm.req.qid",
    "sanlab_nvmeof.cm.qid",
    "sanlab_nvmeof.kind",
    "sanlab_nvmeof.opcode",
    "sanlab_nvmeof.cid",
    "sanlab_nvmeof.nsid",
    "sanlab_nvmeof.slba",
    "sanlab_nvmeof.nlb",
    "sanlab_nvmeof.sgl_length",
    "sanlab_nvmeof.sgl_key",
    "sanlab_iwarp.mpa.key",
    "sanlab_iwarp.rdmap.opcode",
    "sanlab_iwarp.ddp.tagged",
    "sanlab_iwarp.ddp.stag",
    "sanlab_iwarp.ddp.qn",
    "sanlab_iwarp.ddp.msn",
    "sanlab_iwarp.ddp.mo",
    "sanlab_iwarp.rdmap.sink_stag",
    "sanlab_iwarp.rdmap.src_stag",
    "sanlab_iwarp.mpa.ulpdu_length",
    "tcp.segment",
    "_ws.col.Protocol",
    "_ws.col.Info",
)


# Captures the analyser reads: its keys are IP addresses, so it needs IP frames.
# What sanlab frames over TCP (analyze.py's TCP kinds), on a port that exists.
_PORT = r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
DECODE_AS = re.compile(rf"^tcp\.port=={_PORT},(iscsi|nvme-tcp)$")


def _sanlab_ports() -> list[str]:
    """Decode-as rules for the ports sanlab's own stacks use beyond the IANA ones."""
    return [f"tcp.port=={port},iscsi" for port in ISCSI_TCP_PORTS if port != ISCSI_PORT]


def check_file(pcap: Path) -> None:
    try:
        info = pcap.stat()
    except OSError as exc:
        raise SanlabError(f"{pcap}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise SanlabError(f"{pcap}: not a regular file (give a .pcap or .pcapng capture)")
    if info.st_size == 0:
        raise SanlabError(f"{pcap}: empty file, not a capture")


def _tshark_error(stderr: str) -> str:
    """tshark's complaint without its 'Running as user root' banner."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not ln.startswith("Running as user")]
    return " ".join(lines)[-400:] or "no reason given"


def fields_for(labels: bool) -> tuple[str, ...]:
    """The fields to ask tshark for: Wireshark's Info column only when frames need labels
    (a ladder diagram), since it is long text for every frame and slows tshark too."""
    return FIELDS if labels else tuple(f for f in FIELDS if f != INFO)


def tshark_argv(
    pcap: Path, decode_as: tuple[str, ...], fields: tuple[str, ...] = FIELDS, keylog: Path | None = None
) -> list[str]:
    """tshark's command line for the fields the analyser reads, one frame a line; with a TLS
    key log, tshark decrypts (its path is an argument, its secrets are never on a command line)."""
    tshark = shutil.which("tshark")
    if tshark is None:
        raise ToolMissing("tshark", "install it with: apt-get install tshark")
    for rule in decode_as:
        if not DECODE_AS.match(rule):
            raise SanlabError(
                f"--decode-as {rule[:60]!r}: use tcp.port==PORT,iscsi or tcp.port==PORT,nvme-tcp "
                "(PORT 1-65535, e.g. tcp.port==3262,iscsi)"
            )
    plugins = PLUGINS if INFO in fields else ANALYSER_PLUGINS  # labels: name the authentication too
    args = [tshark, *tshark_args(plugins), "-r", str(pcap), "-T", "fields"]
    args += ["-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    if keylog is not None:
        args += ["-o", f"tls.keylog_file:{keylog}"]
    for rule in (*_sanlab_ports(), *decode_as):
        args += ["-d", rule]
    for name in fields:
        args += ["-e", name]
    return args


def tshark_rows(
    pcap: Path, decode_as: tuple[str, ...], fields: tuple[str, ...] = FIELDS, keylog: Path | None = None
) -> Iterator[dict[str, str]]:
    """tshark's rows, one frame at a time as tshark writes them: never the whole output at once.

    A 200 MB capture makes some 400 MB of text; holding it, and a dict per
    frame, took five times the capture's size.  Streaming keeps one row.
    """
    argv = tshark_argv(pcap, decode_as, fields, keylog)
    check_file(pcap)
    padding = [""] * len(fields)
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            assert child.stdout is not None
            for line in child.stdout:
                values = line.rstrip("\n").split("\t") + padding
                yield dict(zip(fields, values[: len(fields)], strict=True))
            if child.wait(timeout=600) != 0:
                errors.seek(0)
                text = errors.read(64 << 10).decode(errors="replace")
                raise SanlabError(f"{pcap}: tshark could not read it: {_tshark_error(text)}")
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


@dataclass
class RowCheck:
    """What would be misread, seen row by row: no IP frames at all, frames cut by a snaplen."""

    rows: int = 0
    ip: bool = False
    cut: int = 0
    snaplen: int = 0

    def see(self, row: dict[str, str]) -> None:
        self.rows += 1
        self.ip = self.ip or bool(row["ip.src"])
        if row["frame.cap_len"] and row["frame.cap_len"] != row["frame.len"]:
            self.cut += 1
            self.snaplen = max(self.snaplen, int(row["frame.cap_len"]))

    def verdict(self, pcap: Path) -> None:
        if not self.rows:
            raise SanlabError(f"{pcap}: holds no frames")
        if not self.ip:
            raise SanlabError(
                f"{pcap}: none of its {self.rows} frames is IPv4; the analyser reads Ethernet "
                "(or raw IP) captures of iSCSI, iSER, SRP and NVMe-oF"
            )
        if self.cut:
            raise SanlabError(
                f"{pcap}: {self.cut} of {self.rows} frames were cut short when captured "
                f"(snaplen {self.snaplen} bytes); the analyser needs whole frames: "
                "capture again without a snaplen"
            )


class Timed(Protocol):
    """A decoded frame as the time-order check sees it: its number in the file and its time."""

    @property
    def number(self) -> int: ...
    @property
    def time(self) -> float: ...


# Timestamps of one capture may step back a little (NIC queues stamp apart); more than this
# means the file is not in time order, and TCP reassembly and every latency would be wrong.
ORDER_SLACK_S = 0.001


def check_time_order(pcap: Path, frames: Sequence[Timed]) -> None:
    """Refuse, in one line, a capture whose frames are not in time order (shuffled, or merged
    without sorting): decoding it gives an empty table or negative latencies, never an error."""
    latest: Timed | None = None
    for frame in frames:
        if latest is not None and frame.time < latest.time - ORDER_SLACK_S:
            raise SanlabError(
                f"{pcap}: frames are not in time order (frame {frame.number} is "
                f"{latest.time - frame.time:.6f} s before frame {latest.number}); sort it by time "
                f"first: reordercap {pcap} sorted.pcap"
            )
        if latest is None or frame.time > latest.time:
            latest = frame

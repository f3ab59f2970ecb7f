"""The ports sanlab's stacks listen on: one home for the targets that open them
and the analyser that must recognise their traffic."""

from __future__ import annotations

ISCSI_PORT = 3260  # iSCSI and iSER (IANA)
NVME_PORT = 4420  # NVMe-oF over TCP and RDMA (IANA)
SRP_PORT = 5555  # ib_srpt's RDMA/CM port (srpt/discovery_auth/rdma_cm_port)
TGT_TCP_PORT = 3261  # tgtd's TCP portal, moved off 3260 so its iSER listener can have it
# TCP ports that carry iSCSI in sanlab's labs, for decoders that know only 3260.
ISCSI_TCP_PORTS = (ISCSI_PORT, TGT_TCP_PORT)
IPERF_PORT = 5201  # iperf3's default; background flow i of a lab uses IPERF_PORT + i

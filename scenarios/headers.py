"""Header sizes of the protocols sanlab emulates, models and dissects, in bytes.

One home for them: the models count bytes per I/O with these, and the
analyser finds payloads in captured frames with the same numbers, so a
model-versus-capture comparison cannot drift on a constant.  Sources: the
protocol standards, as summarised in shared/reference/wire-formats.md, and
Linux's headers where the stacks add their own (LIO's MaxRecvDataSegmentLength
aside, which is negotiated, not a header).
"""

from __future__ import annotations

# Link and network layers.
ETH_HDR, ETH_FCS, ETH_GAP = 14, 4, 20  # header; frame check sequence; preamble + inter-frame gap
IPV4, UDP, TCP_TS = 20, 8, 32  # TCP with the timestamp option Linux sends
# InfiniBand transport (also RoCEv2 over UDP 4791).
BTH, RETH, AETH, ICRC = 12, 16, 4, 4
IB_LRH, IB_VCRC = 8, 2
# iWARP framing.
MPA_LEN, MPA_CRC, DDP_TAGGED, DDP_UNTAGGED = 2, 4, 14, 18
# Storage protocol units.
ISCSI_BHS, DIGEST, ISER_HDR = 48, 4, 28
SRP_CMD, SRP_DESC, SRP_RSP = 48, 16, 36
NVME_SQE, NVME_CQE = 64, 16
NVME_TCP_CMD, NVME_TCP_RESP, NVME_TCP_DATA_HDR = 72, 24, 24
# TLS 1.3 (RFC 8446 5.1-5.2), NVMe/TCP's secure channel: each record has a
# 5-byte header, and, encrypted, a content-type byte and a 16-byte AEAD tag
# (AES-GCM, ChaCha20-Poly1305); a record carries at most 16 KiB of data.
TLS_RECORD_HDR, TLS_INNER_TYPE, TLS_AEAD_TAG, TLS_MAX_RECORD = 5, 1, 16, 16384
# What precedes the RDMA payload of a RoCEv2 frame as QEMU captures it (no FCS).
ROCE_PAYLOAD_OFFSET = ETH_HDR + IPV4 + UDP + BTH

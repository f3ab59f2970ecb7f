"""Small I/Os pay for messages: the NIC's and the slot's work per message, beside the data.

Every message an I/O sends or receives costs its NIC work that no data
byte pays for (Kalia, Kaminsky and Andersen, "Design Guidelines for High
Performance RDMA Systems", USENIX ATC 2016, section 2-3): the host rings a
doorbell (an MMIO write), the NIC fetches the work request by DMA (a read
request up the slot and a completion with the 64-byte descriptor back),
and writes a 64-byte completion entry when it is done; a receive consumes
a posted receive descriptor the same way.  Each of those is a TLP with its
own header and framing (Neugebauer et al., "Understanding PCIe performance
for end host networking", SIGCOMM 2018: 24 bytes on a memory write, 20 on
a completion with data, a read request 24 with no payload; ``pcie.py``),
and the NIC's processing units handle one message at a time each
(``Nic.msg_ns``, fitted; its prior and source are in priors.yaml).

The NIC's engine for the data's direction does both in turn: it fetches
a message's descriptor, streams its data and writes its completion, so
the per-message work adds to the data's DMA, and the wire runs alongside
(``network._streamed``).  Large blocks hide it behind the wire; at 512 B
it is most of an I/O's time on the NIC.
"""

from __future__ import annotations

from sanlab.models.core.pcie import MWR_OVERHEAD

DESCRIPTOR_BYTES = 64  # a work request or receive descriptor (mlx5: one 64-byte WQE basic block)
COMPLETION_BYTES = 64  # a completion queue entry
CPLD_OVERHEAD = 20  # a completion with data: 12-byte header, framing, sequence number and LCRC
MRD_BYTES = 24  # a memory read request: header and framing, no payload
# The slot's bytes one message costs: the descriptor's read request and its completion, and the
# completion entry the NIC writes back.  The doorbell (an 8-byte MMIO write) travels the other
# way and is left out.
TLP_BYTES_PER_MESSAGE = MRD_BYTES + DESCRIPTOR_BYTES + CPLD_OVERHEAD + COMPLETION_BYTES + MWR_OVERHEAD
# RDMA initiators register each I/O's buffer with a work request of its own (nvme-rdma's
# register_always, iSER's and SRP's fast registration: an IB_WR_REG_MR per I/O; the target's
# SEND_WITH_INV invalidates it, so no second one).
REGISTRATIONS = 1


def messages_per_io(messages: int, packets: int, rdma: bool) -> int:
    """Messages the NIC handles for one I/O: each verb's message and the registration over RDMA;
    each packet its TCP stack hands down or takes up (a descriptor and a completion each) over TCP."""
    return messages + REGISTRATIONS if rdma else packets


def message_us(count: int, msg_ns: float, pcie_gbps: float) -> float:
    """The NIC's time on ``count`` messages: its own processing and their TLPs across the slot."""
    per_message = msg_ns / 1000 + TLP_BYTES_PER_MESSAGE * 8 / (pcie_gbps * 1000)
    return count * per_message

"""What a NIC's PCIe slot can move: generation, lanes and payload size to a DMA data rate.

The accounting is the PCI Express Base Specification's, in the form
Neugebauer et al. model it ("Understanding PCIe performance for end host
networking", SIGCOMM 2018, and their published model, pcie-bench/pcie-model):

- **Signalling.**  Gen3 runs 8 GT/s a lane, Gen4 16 and Gen5 32, all with
  128b/130b line coding.
- **Data-link packets.**  The receiver acknowledges TLPs (Ack DLLPs) and
  returns flow-control credits (UpdateFC DLLPs), 8 bytes each with their
  framing, at the intervals the specification recommends for the link's
  width and Max_Payload_Size (Base Specification 5.0, tables 3-7 to 3-9 and
  2-46 to 2-48; the same figures at 8, 16 and 32 GT/s).  SKP ordered sets
  for clock compensation take 4 symbols in 1538.
- **Transaction layer.**  DMA moves data in TLPs of at most
  Max_Payload_Size (MPS).  A memory write with a 64-bit address carries a
  16-byte header and 8 bytes of framing, sequence number and LCRC; a
  completion with data (the answer to the NIC's DMA read) 20.

Data crossing the network is DMA-read by the sending NIC and DMA-written
by the receiving one, so a slot's rate for the data is the slower, the
write's: 52.9 Gb/s for Gen3 x8 at the usual 256-byte MPS (47.7 at 128),
104.0 for Gen3 x16, 207.9 for Gen4 x16 and 415.8 for Gen5 x16, so a 200
GbE port wants Gen4 x16 and a 400 GbE port Gen5 x16.  The work requests,
doorbells and completions beside the data are a few hundred bytes an I/O,
left out here (their latency is ``Nic.pcie_us``).  ``lspci -vv`` shows a
slot's MPS ("MaxPayload") under DevCtl.
"""

from __future__ import annotations

from typing import Final

GT_PER_LANE = {3: 8.0, 4: 16.0, 5: 32.0}  # giga-transfers per second, one bit each
LINE_CODING = 128 / 130
DLLP_BYTES = 8  # an Ack or UpdateFC DLLP with its framing
SKP_SHARE = 4 / 1538  # SKP ordered sets: 4 symbols every 1538
MWR_OVERHEAD = 24  # a 64-bit memory write TLP: 16-byte header, 8 of framing, sequence and LCRC
MPS_DEFAULT: Final = 256  # Max_Payload_Size most server root ports run at (pcie-bench's default)

# The specification's recommended Ack and UpdateFC interval in bytes, by
# lanes and MPS, the same for Gen3, Gen4 and Gen5 (Base Spec 5.0 tables
# 3-7..3-9 and 2-46..2-48): one of each DLLP per this many bytes received.
DLLP_INTERVAL = {
    1: {128: 333, 256: 512, 512: 655},
    2: {128: 224, 256: 313, 512: 385},
    4: {128: 169, 256: 214, 512: 250},
    8: {128: 163, 256: 203, 512: 182},
    16: {128: 144, 256: 168, 512: 182},
}


def coded_gbps(generation: int, lanes: int) -> float:
    """The slot's signalling rate after line coding, one direction, Gb/s."""
    if generation not in GT_PER_LANE:
        raise ValueError(f"PCIe Gen{generation} is not modelled (Gen {', '.join(map(str, GT_PER_LANE))})")
    return GT_PER_LANE[generation] * lanes * LINE_CODING


def tlp_gbps(generation: int, lanes: int, mps: int = MPS_DEFAULT) -> float:
    """What is left of the coded rate for TLPs once Ack and UpdateFC DLLPs and SKP sets are sent."""
    interval = _interval(lanes, mps)
    return coded_gbps(generation, lanes) * (1 - 2 * DLLP_BYTES / interval - SKP_SHARE)


def pcie_gbps(generation: int, lanes: int, mps: int = MPS_DEFAULT) -> float:
    """Effective DMA data rate, one direction, of a PCIe ``generation`` x ``lanes`` slot, Gb/s:
    the TLP rate less each MPS-sized write's header and framing."""
    return tlp_gbps(generation, lanes, mps) * mps / (mps + MWR_OVERHEAD)


def _interval(lanes: int, mps: int) -> int:
    if lanes not in DLLP_INTERVAL:
        raise ValueError(f"a x{lanes} PCIe slot is not modelled (x{', x'.join(map(str, DLLP_INTERVAL))})")
    if mps not in DLLP_INTERVAL[lanes]:
        sizes = ", ".join(map(str, DLLP_INTERVAL[lanes]))
        raise ValueError(f"MaxPayload {mps} is not modelled ({sizes} bytes)")
    return DLLP_INTERVAL[lanes][mps]

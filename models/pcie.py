"""What a NIC's PCIe slot can move: generation and lanes to an effective DMA rate.

Per lane, Gen3 signals 8 GT/s, Gen4 16 and Gen5 32, all with 128b/130b
line coding (PCI-SIG base specifications 3.0, 4.0, 5.0).  Of the coded
rate, transaction-layer headers, data-link packets and flow control take
their share: shared/reference/wire-formats.md gives PCIe Gen3 x8 as about
63 Gb/s raw and 56 Gb/s achievable, the ratio used here for every
generation (Neugebauer et al., "Understanding PCIe performance for end host
networking", SIGCOMM 2018, measure the same order of loss at 256-byte
payloads).  Gen3 x16 comes to 112 Gb/s, the 110 Gb/s fitted for the
ConnectX-5 of starwind-2024; Gen4 x16 to 224 and Gen5 x16 to 448 Gb/s, so a
200 GbE port needs Gen4 x16 and a 400 GbE port Gen5 x16.
"""

from __future__ import annotations

GT_PER_LANE = {3: 8.0, 4: 16.0, 5: 32.0}  # giga-transfers per second, one bit each
LINE_CODING = 128 / 130
ACHIEVABLE = 56 / 63  # of the coded rate: TLP and DLLP overheads (wire-formats.md, Gen3 x8)


def pcie_gbps(generation: int, lanes: int) -> float:
    """Effective DMA rate, one direction, of a PCIe ``generation`` x ``lanes`` slot, Gb/s."""
    if generation not in GT_PER_LANE:
        raise ValueError(f"PCIe Gen{generation} is not modelled (Gen {', '.join(map(str, GT_PER_LANE))})")
    return GT_PER_LANE[generation] * lanes * LINE_CODING * ACHIEVABLE

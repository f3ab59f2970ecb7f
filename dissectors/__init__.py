"""Wireshark Lua dissectors for what Wireshark lacks, and the capture analyser.

``srp.lua`` decodes the SCSI RDMA Protocol over InfiniBand and RoCE;
``iwarp.lua`` decodes MPA (revision 1 and 2), DDP and RDMAP with iSER and
NVMe-oF payloads, as soft-iWARP speaks them.  ``plugins`` finds, installs
and loads them; ``analyze`` turns a capture into per-I/O wire recipes.
"""

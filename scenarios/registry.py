"""The transports, fabrics and target stacks sanlab knows: one typed object each, every fact in it.

One home for them.  The scenario schema's enums, the command line's choices,
validation, the emulator's tool and module checks, the targets' recipes, the
model and the analyser read these objects; none of them branches on a
transport's, fabric's or stack's name (tests/test_registry.py parses the code
to hold that).  A new transport variant is one entry here, the regenerated
schema.json, its message ladder (models/core/transports.py), its costs
(models/stacks.yaml) and its tests: scenarios/README.md lists what else a
variant may touch.

The facts are the protocols' and Linux's, not preferences: iSER, SRP and
NVMe/RDMA need an RDMA fabric; soft-RoCE (rxe) stands in for RoCE and
InfiniBand, soft-iWARP (siw) for iWARP; SCST and SPDK are projection-only
because the guest image does not ship them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sanlab.scenarios import ports

# The names, as types the schema and mypy can check; the objects below must match them.
TransportName = Literal["iscsi", "iser", "srp", "nvme-tcp", "nvme-rdma"]
FabricName = Literal["eth", "roce", "iwarp", "ib"]
StackName = Literal["lio", "tgt", "nvmet", "scst", "spdk"]
RdmaDriverName = Literal["rxe", "siw"]
GuestName = Literal["debian-12", "debian-13"]


@dataclass(frozen=True)
class Fabric:
    """A kind of link: what it carries, and what emulates it on a laptop."""

    name: str
    title: str
    rdma: bool  # carries RDMA verbs
    carries_tcp: bool  # a byte stream: TCP transports run on it, and RDMA too on iWARP
    soft_driver: str | None  # the soft-RDMA driver that stands in for it in the guests
    mpa: bool = False  # RDMA framed in TCP by MPA markers and CRCs (iWARP)
    infiniband: bool = False  # InfiniBand's link layer (LRH, VCRC) and coded signalling rates


@dataclass(frozen=True)
class Stack:
    """A target implementation."""

    name: str
    title: str
    emulated: bool  # the guest image ships it (the others are projected only)
    configfs: bool  # configured through configfs (LIO, nvmet): sanlab checks the mount
    tools: tuple[str, ...] = ()  # what the target host must have besides the kernel
    # The transports over which it serves several initiators at once, each
    # admitted by a name of its own (an IQN's ACL, or any host NQN).
    shared: tuple[str, ...] = ()
    multipath: bool = False  # exports on several addresses at once, the paths of a multipath device
    # Characters a CHAP user name cannot hold on this stack: tgtadm sends
    # "user=NAME,password=SECRET" and tgtd cuts the name at the first comma (usr/mgmt.c).
    chap_name_forbids: str = ""
    # The calibrated stack whose costs the model borrows when this one has none of its own
    # (the most similar one; models/README.md says why each pairing is fair).
    stand_in: str = ""
    # The kernel config options the stack itself needs (its core and configfs); set only for
    # the stacks that run inside the kernel, whose transports' ``target_options`` then apply.
    kernel_options: tuple[str, ...] = ()

    @property
    def in_kernel(self) -> bool:
        """The target runs in the kernel (LIO, nvmet), not as a process (tgt)."""
        return bool(self.kernel_options)


@dataclass(frozen=True)
class Transport:
    """A block-storage transport and every fact a layer needs of it."""

    name: str
    title: str
    family: Literal["scsi", "nvme"]
    carrier: Literal["tcp", "rdma", "none"]  # "none": no wire at all (LOCAL below)
    port: int  # where its targets listen (IANA, or the stack's own)
    fabrics: tuple[str, ...]  # the fabrics it runs over
    stacks: tuple[str, ...]  # the target stacks that serve it, the default first
    restartable: tuple[str, ...]  # stacks whose service sanlab can stop and start under I/O
    digests: bool  # header and data digests (CRC32C) are its own; RDMA checks its frames itself
    chap: bool  # CHAP at login
    sessions: bool  # the user logs in sessions (iSCSI, iSER); else a queue or channel per CPU
    max_transfer: int  # the Linux initiator's largest request by default, in bytes
    initiator: str  # the Linux initiator that speaks it
    initiator_tools: tuple[str, ...]  # what the initiator host must have
    modules: tuple[str, ...]  # kernel modules, initiator's then target's
    # What joins several paths to one target into one device: "native" (the
    # NVMe host's own multipath), "dm-multipath" (the device mapper, over one
    # session per path), or "" (not built).
    multipath: Literal["native", "dm-multipath", ""] = ""
    tls: bool = False  # a TLS 1.3 secure channel of its own (NVMe/TCP transport spec 3.6)
    # Every queue inside that channel: TLS is the transport, not a target's choice (a variant
    # such as NVMe/TCP-in-TLS as a transport of its own); the schema turns ``tls`` on for it.
    always_tls: bool = False
    # The kernel config options its Linux initiator needs, and those its in-kernel target needs
    # when a stack inside the kernel serves it (``Stack.in_kernel``: LIO, nvmet; tgt is a
    # process and needs none): what a kernel a user brings is checked for before it boots.
    kernel_options: tuple[str, ...] = ()
    target_options: tuple[str, ...] = ()
    # What carries a SCSI command on the wire before its CDB, as a ladder names it ("SRP_CMD: ").
    command_envelope: str = ""
    # What a ladder calls the target's answer to a command.
    response: str = "NVMe completion"
    # The TCP ports a capture's streams are framed as this transport on (every stack's portal;
    # an RDMA transport's traffic is recognised by its own headers instead).
    tcp_ports: tuple[int, ...] = ()

    @property
    def rdma(self) -> bool:
        return self.carrier == "rdma"

    @property
    def networked(self) -> bool:
        """A network lies between the application and the drive (every kind but LOCAL)."""
        return self.carrier != "none"

    @property
    def nvme(self) -> bool:
        """NVMe hosts have blk-mq poll queues, I/O queues of their own choosing, and controller resets."""
        return self.family == "nvme"

    @property
    def resettable(self) -> bool:
        """Its initiator can reset what carries it under I/O: NVMe controllers, or the TCP
        connection of an iSCSI session (iSER's is an RDMA connection, which nothing here cuts)."""
        return self.nvme or (self.sessions and self.carrier == "tcp")

    @property
    def default_stack(self) -> str:
        return self.stacks[0]

    def runs_over(self, fabric: str) -> bool:
        return fabric in self.fabrics


FABRICS: dict[str, Fabric] = {
    f.name: f
    for f in (
        Fabric("eth", "Ethernet", rdma=False, carries_tcp=True, soft_driver=None),
        Fabric("roce", "RoCE", rdma=True, carries_tcp=False, soft_driver="rxe"),
        Fabric("iwarp", "iWARP", rdma=True, carries_tcp=True, soft_driver="siw", mpa=True),
        Fabric("ib", "InfiniBand", rdma=True, carries_tcp=False, soft_driver="rxe", infiniband=True),
    )
}

STACKS: dict[str, Stack] = {
    s.name: s
    for s in (
        Stack(
            "lio",
            "LIO",
            emulated=True,
            configfs=True,
            shared=("iscsi", "iser"),
            multipath=True,
            stand_in="scst",
            kernel_options=("CONFIG_CONFIGFS_FS", "CONFIG_TARGET_CORE"),
        ),
        Stack(
            "tgt",
            "tgt",
            emulated=True,
            configfs=False,
            tools=("tgtadm",),
            shared=("iscsi", "iser"),
            multipath=True,
            chap_name_forbids=",",
            stand_in="scst",
        ),
        Stack(
            "nvmet",
            "nvmet",
            emulated=True,
            configfs=True,
            shared=("nvme-tcp", "nvme-rdma"),
            multipath=True,
            stand_in="spdk",
            kernel_options=("CONFIG_CONFIGFS_FS", "CONFIG_NVME_TARGET"),
        ),
        Stack("scst", "SCST", emulated=False, configfs=False, stand_in="lio"),
        Stack("spdk", "SPDK", emulated=False, configfs=False, stand_in="nvmet"),
    )
}


@dataclass(frozen=True)
class Guest:
    """A guest image the VMs boot: a Debian release and what its kernel offers."""

    name: str
    title: str
    recipe: str  # its recipe in vm-images/ (each guest has its own image key)
    nvme_tls: bool  # NVMe/TCP TLS, host and target (CONFIG_NVME_TCP_TLS, CONFIG_NVME_TARGET_TCP_TLS)
    nvme_auth: bool  # NVMe in-band authentication, DH-HMAC-CHAP (CONFIG_NVME_HOST_AUTH, _TARGET_AUTH)


GUESTS: dict[str, Guest] = {
    g.name: g
    for g in (
        Guest("debian-12", "Debian 12 (bookworm, Linux 6.1)", "recipe.yaml", nvme_tls=False, nvme_auth=False),
        Guest(
            "debian-13",
            "Debian 13 (trixie, Linux 6.12)",
            "recipe-debian-13.yaml",
            nvme_tls=True,
            nvme_auth=True,
        ),
    )
}
# The guest a scenario boots unless it says otherwise: the one every test passes on.
DEFAULT_GUEST: GuestName = "debian-12"

# The kernel module of each soft-RDMA driver, and the config option that builds it.
SOFT_RDMA_MODULES = {"rxe": "rdma_rxe", "siw": "siw"}
SOFT_RDMA_OPTIONS = {"rxe": "CONFIG_RDMA_RXE", "siw": "CONFIG_RDMA_SIW"}

# What else a kernel must be built with, by what needs it (each option =y or =m).  A guest
# boots from an initramfs (init mounts devtmpfs), talks to sanlab over virtio-serial, cables
# are virtio NICs, captures and Mininet use packet sockets.
GUEST_KERNEL_OPTIONS = (
    "CONFIG_BLK_DEV_INITRD", "CONFIG_DEVTMPFS", "CONFIG_VIRTIO_PCI", "CONFIG_VIRTIO_NET",
    "CONFIG_VIRTIO_CONSOLE", "CONFIG_UNIX", "CONFIG_PACKET",
)  # fmt: skip
RDMA_KERNEL_OPTIONS = ("CONFIG_INFINIBAND", "CONFIG_INFINIBAND_USER_ACCESS", "CONFIG_INFINIBAND_ADDR_TRANS")
SHAPING_KERNEL_OPTIONS = ("CONFIG_NET_SCH_NETEM", "CONFIG_NET_SCH_TBF")  # a link's delay, loss, rate
NVME_TLS_KERNEL_OPTIONS = ("CONFIG_TLS", "CONFIG_NVME_TCP_TLS", "CONFIG_NVME_TARGET_TCP_TLS")
NVME_AUTH_KERNEL_OPTIONS = ("CONFIG_NVME_HOST_AUTH", "CONFIG_NVME_TARGET_AUTH")
DM_MULTIPATH_KERNEL_OPTIONS = ("CONFIG_BLK_DEV_DM", "CONFIG_DM_MULTIPATH")

_SCSI_MAX = 512 << 10  # open-iscsi's and ib_srp's max_sectors
_NVME_MAX = 128 << 10  # the NVMe-oF hosts' default max_hw_sectors

TRANSPORTS: dict[str, Transport] = {
    t.name: t
    for t in (
        Transport(
            "iscsi", "iSCSI", "scsi", "tcp", ports.ISCSI_PORT, ("eth", "iwarp"),
            ("lio", "tgt", "scst", "spdk"), ("lio", "tgt"), digests=True, chap=True, sessions=True,
            max_transfer=_SCSI_MAX, initiator="open-iscsi", initiator_tools=("iscsiadm",),
            modules=("iscsi_tcp", "iscsi_target_mod"), multipath="dm-multipath", response="SCSI Response",
            kernel_options=("CONFIG_ISCSI_TCP",), target_options=("CONFIG_ISCSI_TARGET",),
            tcp_ports=ports.ISCSI_TCP_PORTS,
        ),
        Transport(
            "iser", "iSER", "scsi", "rdma", ports.ISCSI_PORT, ("roce", "iwarp", "ib"),
            ("lio", "tgt", "scst"), ("lio",), digests=False, chap=True, sessions=True,
            max_transfer=_SCSI_MAX, initiator="open-iscsi (iSER)", initiator_tools=("iscsiadm",),
            modules=("ib_iser", "ib_isert"), multipath="dm-multipath", response="SCSI Response",
            kernel_options=("CONFIG_INFINIBAND_ISER",), target_options=("CONFIG_INFINIBAND_ISERT",),
        ),
        Transport(
            "srp", "SRP", "scsi", "rdma", ports.SRP_PORT, ("ib", "roce"),
            ("lio", "scst"), (), digests=False, chap=False, sessions=False,
            max_transfer=_SCSI_MAX, initiator="ib_srp", initiator_tools=(),
            modules=("ib_srp", "ib_srpt"), command_envelope="SRP_CMD: ", response="SRP_RSP",
            kernel_options=("CONFIG_INFINIBAND_SRP",), target_options=("CONFIG_INFINIBAND_SRPT",),
        ),
        Transport(
            "nvme-tcp", "NVMe/TCP", "nvme", "tcp", ports.NVME_PORT, ("eth", "iwarp"),
            ("nvmet", "spdk"), ("nvmet",), digests=True, chap=False, sessions=False,
            max_transfer=_NVME_MAX, initiator="nvme-cli (nvme-tcp)", initiator_tools=("nvme",),
            modules=("nvme_tcp", "nvmet_tcp"), multipath="native", tls=True,
            kernel_options=("CONFIG_NVME_TCP",), target_options=("CONFIG_NVME_TARGET_TCP",),
            tcp_ports=(ports.NVME_PORT,),
        ),
        Transport(
            "nvme-rdma", "NVMe/RDMA", "nvme", "rdma", ports.NVME_PORT, ("roce", "iwarp", "ib"),
            ("nvmet", "spdk"), ("nvmet",), digests=False, chap=False, sessions=False,
            max_transfer=_NVME_MAX, initiator="nvme-cli (nvme-rdma)", initiator_tools=("nvme",),
            modules=("nvme_rdma", "nvmet_rdma"), multipath="native",
            kernel_options=("CONFIG_NVME_RDMA",), target_options=("CONFIG_NVME_TARGET_RDMA",),
        ),
    )
}  # fmt: skip

# The order in which the analyser names a capture by what it saw, when it saw several: the
# first transport seen names the capture (the others are listed beside it), and the first
# fabric seen its fabric (none seen: the plain one).
DETECTION_ORDER: tuple[str, ...] = ("srp", "iser", "nvme-rdma", "nvme-tcp", "iscsi")
FABRIC_DETECTION_ORDER: tuple[str, ...] = ("iwarp", "roce")
# Each TCP port a capture's streams are framed on, and the transport they are framed as.
TCP_PORTS: dict[int, str] = {port: t.name for t in TRANSPORTS.values() for port in t.tcp_ports}

# The model's one kind no scenario can ask for: a published row measured on the target's own
# drive, with no transport, wire or target stack between (only the drive's NVMe driver, whose
# cost is models/stacks.yaml's "local").  It is in neither TRANSPORTS nor STACKS, so the
# schema, the command line and validation never offer it; the model reads MODEL_TRANSPORTS.
LOCAL_STACK = Stack("local", "the drive's own driver", emulated=False, configfs=False)
LOCAL = Transport(
    "local", "no transport (the drive itself)", "nvme", "none", 0, ("eth",), (LOCAL_STACK.name,), (),
    digests=False, chap=False, sessions=False, max_transfer=128 << 10,  # the NVMe drive's max_hw_sectors
    initiator="", initiator_tools=(), modules=(),
)  # fmt: skip
MODEL_TRANSPORTS: dict[str, Transport] = {**TRANSPORTS, LOCAL.name: LOCAL}
MODEL_STACKS: dict[str, Stack] = {**STACKS, LOCAL_STACK.name: LOCAL_STACK}

# The fabric a TCP transport is placed on, whatever else its link carries, and the one an RDMA
# transport is projected on when nothing says which.
PLAIN_FABRIC = FABRICS["eth"]
DEFAULT_RDMA_FABRIC = FABRICS["roce"]

TRANSPORT_NAMES: tuple[str, ...] = TransportName.__args__  # type: ignore[attr-defined]
FABRIC_NAMES: tuple[str, ...] = FabricName.__args__  # type: ignore[attr-defined]
STACK_NAMES: tuple[str, ...] = StackName.__args__  # type: ignore[attr-defined]
GUEST_NAMES: tuple[str, ...] = GuestName.__args__  # type: ignore[attr-defined]
if (tuple(TRANSPORTS), tuple(FABRICS), tuple(STACKS), tuple(GUESTS)) != (
    TRANSPORT_NAMES,
    FABRIC_NAMES,
    STACK_NAMES,
    GUEST_NAMES,
):
    raise AssertionError("registry: the objects and the name types must list the same names, in order")
if sorted(DETECTION_ORDER) != sorted(TRANSPORTS) or not set(FABRIC_DETECTION_ORDER) <= set(FABRICS):
    raise AssertionError("registry: DETECTION_ORDER must rank every transport, and only known fabrics")


def names(items: Mapping[str, object], **facts: object) -> tuple[str, ...]:
    """The names of the entries whose attributes equal ``facts``: names(TRANSPORTS, carrier="tcp")."""
    return tuple(n for n, item in items.items() if all(getattr(item, k) == v for k, v in facts.items()))


def serving(stack: str) -> tuple[str, ...]:
    """The transports ``stack`` serves."""
    return tuple(t.name for t in TRANSPORTS.values() if stack in t.stacks)


@dataclass(frozen=True)
class Limit:
    """What the guests' Linux (6.1) refuses for one transport, stack and fabric, as seen there."""

    transport: str
    stack: str | None  # None: every stack
    fabric: str
    field: str  # the target field the refusal names
    why: str  # {link} is the link's name


EMULATION_LIMITS = (
    Limit(
        "srp", None, "iwarp", "transport",
        "SRP does not run over iWARP: on {link} ib_srp's login is rejected (REJ, reason -104) "
        "and ib_srpt never sees it; use a roce or ib link",
    ),
    Limit(
        "iser", "lio", "iwarp", "stack",
        "LIO cannot serve iSER over iWARP on {link}: it binds its TCP and iSER listeners to the "
        "same address and port, and siw's RDMA listener is a TCP socket (EADDRINUSE); use stack: tgt",
    ),
)  # fmt: skip


def limits(transport: str, stack: str, fabric: str) -> list[Limit]:
    """The emulation limits that refuse this transport, served by ``stack``, over ``fabric``."""
    return [
        lim
        for lim in EMULATION_LIMITS
        if (lim.transport, lim.fabric) == (transport, fabric) and lim.stack in (None, stack)
    ]


def driver_fabric(driver: str) -> Fabric:
    """The first fabric a soft-RDMA driver stands in for (rxe: RoCE; siw: iWARP)."""
    return next(f for f in FABRICS.values() if f.soft_driver == driver)

"""The sections of a scenario file: hosts, switches, links, targets, workloads, faults,
background flows and projections.

Each is a strict model (fields.py): an unknown field is an error, not a silent default.
``Layout`` is what a plan is worked out from (topology.py, plan.py): the sections that say
what joins what, which the whole scenario (schema.py) has and which those modules need
without knowing the scenario itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, Protocol

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from sanlab.scenarios.fields import (
    DEFAULT_PROFILE,
    MAX_AXIS,
    MAX_IODEPTH,
    MAX_NUMJOBS,
    TEXT_LINE,
    Backend,
    Backstore,
    BitsPerSecond,
    BlockSize,
    ChapName,
    ChapText,
    Delay,
    DevicePath,
    DhchapSecret,
    Fabric,
    FaultAt,
    FaultLength,
    HostName,
    InterfaceName,
    Label,
    LunSize,
    MemorySize,
    Percent,
    ProfileRef,
    RdmaDriver,
    ReadWrite,
    Role,
    Runtime,
    SshDestination,
    SshKeyFile,
    SshOption,
    Stack,
    Strict,
    TlsPsk,
    Transport,
    as_list,
    not_a_yes_no,
    yaml_null_is_null_device,
)
from sanlab.scenarios.registry import TRANSPORTS
from sanlab.scenarios.ssh_options import MAX_OPTIONS


def tls_by_transport(data: Any) -> Any:
    """A transport that is always inside TLS (the registry's ``always_tls``) sets ``tls`` itself:
    unset, it is on; set off, it is a mistake.  Every reader of ``tls`` (validation, the
    recipes, the model) then needs nothing of its own for such a variant."""
    if not isinstance(data, dict):
        return data
    kind = TRANSPORTS.get(str(data.get("transport")))
    if kind is None or not kind.always_tls:
        return data
    if data.get("tls") is False:
        raise ValueError(f"{kind.name} is always inside TLS: drop 'tls: false'")
    return data if data.get("tls") else {**data, "tls": True}


class Host(Strict):
    """A VM, or a real machine reached over SSH, that plays one role.

    ``ssh`` makes it a real machine: OpenSSH reaches it (the user's ssh
    config, agent and ProxyJump apply) and ``cpus``/``memory`` do not.
    """

    name: HostName
    role: Role
    cpus: int = Field(1, ge=1, le=16)
    memory: MemorySize = 1 << 30
    ssh: SshDestination | None = None
    port: int | None = Field(None, ge=1, le=65535)
    identity: SshKeyFile | None = None  # a private key file for ssh -i
    ssh_options: Annotated[list[SshOption], Field(max_length=MAX_OPTIONS)] = []  # each passed as ssh -o


class Switch(Strict):
    """An Ethernet switch of an emulated fabric; links join hosts to it and switches to each other.

    Switches are built by Mininet in a fabric VM of their own: each is a
    Linux bridge whose ports are the host VMs' cables.  Hosts on switches
    that reach each other share one layer-2 segment (one IPv4 subnet).
    """

    name: HostName
    # Spanning tree, for fabrics with loops (two spines); off, a loop floods.
    stp: bool = False


class Flow(Strict):
    """Background traffic for as long as a lab runs: iperf3 from a Mininet host on ``switch``
    to host ``to``, sharing the switch ports on its way with the storage traffic."""

    switch: HostName
    to: HostName
    rate: BitsPerSecond
    protocol: Literal["udp", "tcp"] = "udp"


class Link(Strict):
    """A point-to-point link; with RDMA it carries a soft-RDMA device too.

    An end may name a switch instead of a host: the link is then a cable
    into that switch's port (or, between two switches, a Mininet link).

    Between real machines a link is the cable that is already there:
    ``interfaces`` names the NIC at each end (its address is read from it)
    and ``rdma_devices`` the RDMA device on it where the NIC's own is not
    the one wanted; rate, delay and loss are the hardware's, not shaped.
    """

    name: HostName | None = None
    endpoints: list[HostName] = Field(min_length=2, max_length=2)
    fabric: Fabric = "eth"
    rdma_driver: RdmaDriver | None = None
    rate: BitsPerSecond | None = None
    delay: Delay = 0.0
    loss: Percent = 0.0
    mtu: int = Field(1500, ge=576, le=9000)
    # Packets each end may hold queued (netem's limit, Mininet's
    # max_queue_size); unset, the kernel's default queues.
    queue: int | None = Field(None, ge=1, le=1_000_000)
    interfaces: dict[HostName, InterfaceName] | None = None
    rdma_devices: dict[HostName, InterfaceName] | None = None


class Chap(Strict):
    """One-way CHAP credentials for iSCSI and iSER logins."""

    username: Annotated[ChapName, Field(min_length=1, max_length=255)]
    # RFC 3720 wants secrets of 12 bytes or more; initiators cap them at 16.
    password: Annotated[ChapText, Field(min_length=12, max_length=16)]


class NvmeAuth(Strict):
    """NVMe in-band authentication (DH-HMAC-CHAP, NVMe over Fabrics 8.13): the secret the
    target holds for its host, and the one the host presents (the same unless told; a
    different one must fail to connect)."""

    secret: DhchapSecret
    initiator_secret: DhchapSecret | None = None


class NvmeTls(Strict):
    """NVMe/TCP over TLS 1.3 with a given configured PSK (``tls: true`` makes a fresh one for
    each export instead): the target's, and the host's (the same unless told; a different
    one must fail the handshake)."""

    psk: TlsPsk
    initiator_psk: TlsPsk | None = None


class Target(Strict):
    """A storage target on a host and the transport it exports over."""

    name: HostName | None = None
    host: HostName
    stack: Stack
    transport: Transport
    link: HostName | None = None
    # Multipath (NVMe's native one; dm-multipath for iSCSI and iSER): the
    # links (cables between the target's host and one initiator) the target
    # is exported and connected on, one path each.  The first is the
    # target's link.
    paths: Annotated[list[HostName], Field(min_length=2, max_length=4)] | None = None
    backstore: Annotated[Backstore, BeforeValidator(yaml_null_is_null_device)] = "ramdisk"
    size: LunSize = 64 << 20
    luns: int = Field(1, ge=1, le=16)
    header_digest: bool = False
    data_digest: bool = False
    chap: Chap | None = None
    auth: NvmeAuth | None = None
    # NVMe/TCP inside TLS 1.3 (tlshd does the handshake, the kernel encrypts).
    tls: bool | NvmeTls = False
    # backstore 'device': a block device of the target host's own.  sanlab
    # refuses one that is mounted or in use, and one that holds a file
    # system or partition table unless ``destroy`` says its data may go.
    device: DevicePath | None = None
    destroy: bool = False

    @model_validator(mode="before")
    @classmethod
    def _tls_of_its_transport(cls, data: Any) -> Any:
        return tls_by_transport(data)

    @field_validator("tls", mode="wrap")
    @classmethod
    def _tls_read_one_way(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A mapping is a PSK setting and nothing else: its mistakes are said once, at its own
        fields, not beside a "not a valid boolean" from the other reading of ``tls``."""
        if isinstance(value, dict):
            return NvmeTls.model_validate(value)
        if not isinstance(value, bool):
            raise ValueError(not_a_yes_no(value) + " (or {psk: NVMeTLSkey-1:...})")
        return handler(value)


class Workload(Strict):
    """A fio matrix: every combination of rw x bs x iodepth x numjobs is a point."""

    name: Label | None = None
    rw: Annotated[list[ReadWrite], BeforeValidator(as_list), Field(min_length=1, max_length=4)]
    bs: Annotated[list[BlockSize], BeforeValidator(as_list), Field(min_length=1, max_length=MAX_AXIS)]
    iodepth: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_IODEPTH)]],
        BeforeValidator(as_list),
        Field(min_length=1, max_length=MAX_AXIS),
    ] = [1]
    numjobs: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_NUMJOBS)]],
        BeforeValidator(as_list),
        Field(min_length=1, max_length=MAX_AXIS),
    ] = [1]
    runtime: Runtime = 10.0
    verify: Literal["crc32c", "off"] = "off"
    # Bytes each fio job writes and reads back when verifying (default: 16m,
    # or the target's size if smaller).  A verified run is bounded by size,
    # not by runtime, so that every block written is read back and checked.
    verify_size: LunSize | None = None
    transports: Annotated[list[Transport], Field(min_length=1, max_length=5)] | None = None


class Fault(Strict):
    """Something that goes wrong during every point of the targets it reaches.

    ``at`` counts from the point's first completed I/O.  ``down`` takes both
    ends of ``link`` down for ``for`` seconds and brings them up again, as a
    pulled and replugged cable would.  ``loss`` and ``delay`` are bursts:
    for ``for`` seconds both ends drop that share of their frames, or hold
    each one that long, and then carry on as before.  ``restart`` stops
    ``target``'s service (nvmet's ports, LIO's portal group) for ``for``
    seconds and starts it again; ``reset`` resets the initiator's NVMe
    controllers of ``target`` (as ``nvme reset`` does).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    at: FaultAt
    link: HostName | None = None  # down, loss and delay: the cable they act on
    target: HostName | None = None  # restart and reset: the target (by name) they act on
    action: Literal["down", "loss", "delay", "restart", "reset"] = "down"
    length: FaultLength = Field(2.0, alias="for")
    loss: Percent | None = None  # with action loss: the share of frames dropped
    delay: Delay | None = None  # with action delay: how long each frame is held, one way
    # With action down: how the cable is pulled.  ``carrier`` (the default): the emulator drops
    # carrier at both NICs and the guests keep their routes, as a pulled cable does;
    # ``interfaces``: ``ip link set down`` inside both hosts, routes and all (what the rxe QP 1
    # and iSER reproducers need: targets/README.md).  Unset: carrier.
    pull: Literal["carrier", "interfaces"] | None = None


# A kernel release as ``uname -r`` prints it, or a shell-style pattern of one ('6.1.0-*').
_KERNEL_RELEASE = r"^[A-Za-z0-9][A-Za-z0-9.+_~*?-]{0,63}$"
_ONE_LINE = Annotated[str, Field(min_length=1, max_length=300, pattern=TEXT_LINE)]


class KnownBug(Strict):
    """The kernel bug a scenario reproduces (scenarios/reproducers/), so that a run on a kernel
    that has it ends ``known-bad`` with one line of why, and a run on a fixed kernel passes.

    A point shows the bug when it fails (an error, a block that failed verification, or I/O
    not back within ``recover_within`` of a fault) with one of ``shows`` in its error, on a
    kernel whose release matches one of ``kernels``.  Any other failure stays a failure."""

    name: Label
    title: _ONE_LINE  # the bug in a line, as a kernel developer would search for it
    kernels: Annotated[
        list[Annotated[str, Field(pattern=_KERNEL_RELEASE)]], Field(min_length=1, max_length=16)
    ]
    symptom: _ONE_LINE  # what sanlab measures that counts as the failure
    shows: Annotated[list[_ONE_LINE], Field(min_length=1, max_length=8)]  # error text that marks it
    fix: _ONE_LINE  # what a fix must change, and what a run then shows
    # A point hit by a fault whose I/O is not back this many seconds after the fault ends fails.
    recover_within: Runtime | None = None


class Projection(Strict):
    """A hardware set-up onto which the models project the workloads.

    Unset fields come from the profile (link rate, MTU, target stack) or from
    the scenario's targets (transport).
    """

    profile: ProfileRef = DEFAULT_PROFILE
    label: Annotated[str, Field(max_length=80, pattern=TEXT_LINE)] | None = None
    transport: Transport | None = None
    fabric: Fabric | None = None
    link_gbps: float | None = Field(None, gt=0, le=800)
    mtu: int | None = Field(None, ge=576, le=9000)
    target_stack: Stack | None = None
    backend: Annotated[Backend | None, BeforeValidator(yaml_null_is_null_device)] = None
    sessions: int | None = Field(None, ge=1, le=256)
    cores: int | None = Field(None, ge=1, le=512)  # per host, in place of the profile's
    # core design of both hosts' CPUs (a name in models/cores.yaml), in place of the profile's
    core: Annotated[str, Field(max_length=40, pattern=r"^[a-z][a-z0-9-]*$")] | None = None
    # Initiators like the profile's, each with this workload, sharing the
    # target's one port through a switch (incast); 1 is a cable.  Unset, as
    # many as reach the scenario's target of this transport (one without hosts).
    initiators: int | None = Field(None, ge=1, le=64)
    header_digest: bool = False
    data_digest: bool = False
    # NVMe/TCP only: inside TLS 1.3 (the AEAD's cost per byte on both hosts, records on the wire).
    tls: bool = False
    # NVMe hosts only: poll for completions (fio --hipri on poll queues), and
    # the I/O queues per controller (nvme connect --nr-io-queues; unset, one per CPU).
    poll: bool = False
    queues: int | None = Field(None, ge=1, le=1024)

    @model_validator(mode="before")
    @classmethod
    def _tls_of_its_transport(cls, data: Any) -> Any:
        return tls_by_transport(data)


class Layout(Protocol):
    """What joins what, and what goes wrong where: the sections a plan is worked out from (a
    Scenario is one)."""

    @property
    def hosts(self) -> Sequence[Host]: ...
    @property
    def switches(self) -> Sequence[Switch]: ...
    @property
    def links(self) -> Sequence[Link]: ...
    @property
    def targets(self) -> Sequence[Target]: ...
    @property
    def faults(self) -> Sequence[Fault]: ...

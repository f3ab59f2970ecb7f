"""The scenario file: what a lab is made of and what to measure or project.

A scenario is data, like a Mininet topology: hosts with roles, links between
them, the storage targets that run on the hosts, a fio matrix, and the
hardware profiles onto which the models project the same matrix.  Every model
forbids unknown fields, so a typo is an error instead of a silent default.

``scenarios/schema.json`` is exported from these classes (``python -m
sanlab.scenarios.schema``) and a test keeps it in sync.
"""

from __future__ import annotations

import json
import sys
from functools import cached_property
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sanlab.scenarios.plan import Plan

from sanlab.scenarios.nvme_keys import check_dhchap_secret, check_tls_psk
from sanlab.scenarios.registry import (
    DEFAULT_GUEST,
    FabricName,
    GuestName,
    RdmaDriverName,
    StackName,
    TransportName,
)
from sanlab.scenarios.sizes import (
    BLOCK_SIZE,
    FAULT_AT,
    FAULT_LENGTH,
    HOST_MEMORY,
    LINK_DELAY,
    LUN_SIZE,
    RUNTIME,
    parse_percent,
    parse_rate,
)
from sanlab.scenarios.ssh_options import (
    DESTINATION,
    DESTINATION_HINT,
    KEY_FILE_SHAPE,
    MAX_OPTIONS,
    OPTION_SHAPE,
    check_key_file,
    check_option,
)

# Transports, fabrics and stacks are the registry's (scenarios/registry.py).
Fabric = FabricName
RdmaDriver = RdmaDriverName
Stack = StackName
Transport = TransportName
Backstore = Literal["ramdisk", "null", "file", "device"]
Backend = Literal["null", "ramdisk", "nvme"]
ReadWrite = Literal["read", "write", "randread", "randwrite"]
Role = Literal["initiator", "target"]

# The hardware profile a projection uses when it names none (models/profiles).
DEFAULT_PROFILE = "modern-100g"

# Practical ceilings: a matrix axis of more than 32 values, or more than 16
# VMs on a 2-core machine, is a typo or a sweep (sanlab sweep), not a lab.
MAX_AXIS = 32
MAX_HOSTS = 16
MAX_SWITCHES = 16
MAX_IODEPTH = 1024
MAX_NUMJOBS = 64

READ_WRITE: tuple[str, ...] = ReadWrite.__args__  # type: ignore[attr-defined]

_SIZE_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]}
_SECONDS_SCHEMA = {"anyOf": [{"type": "number"}, {"type": "string"}]}
BlockSize = Annotated[int, BeforeValidator(BLOCK_SIZE.check), WithJsonSchema(_SIZE_SCHEMA)]
MemorySize = Annotated[int, BeforeValidator(HOST_MEMORY.check), WithJsonSchema(_SIZE_SCHEMA)]
LunSize = Annotated[int, BeforeValidator(LUN_SIZE.check), WithJsonSchema(_SIZE_SCHEMA)]
Runtime = Annotated[float, BeforeValidator(RUNTIME.check), WithJsonSchema(_SECONDS_SCHEMA)]
Delay = Annotated[float, BeforeValidator(LINK_DELAY.check), WithJsonSchema(_SECONDS_SCHEMA)]
FaultAt = Annotated[float, BeforeValidator(FAULT_AT.check), WithJsonSchema(_SECONDS_SCHEMA)]
FaultLength = Annotated[float, BeforeValidator(FAULT_LENGTH.check), WithJsonSchema(_SECONDS_SCHEMA)]
BitsPerSecond = Annotated[float, BeforeValidator(parse_rate), WithJsonSchema({"type": "string"})]
Percent = Annotated[
    float,
    BeforeValidator(parse_percent),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}]}),
]
_HOST_NAME = r"^[a-z][a-z0-9-]{0,30}$"
# A label a person reads (a scenario's or workload's name): never a path, never a shell word.
_LABEL = r"^[A-Za-z0-9][A-Za-z0-9 ._+-]{0,63}$"
# A profile by name (models/profiles) or a path to a profile's .yaml file.
_PROFILE = r"^([a-z0-9][a-z0-9._-]{0,63}|[^\x00-\x1f]{1,250}\.ya?ml)$"
# What the iSCSI stacks accept in CHAP names and secrets, and what survives
# open-iscsi's node records (key = value lines): printable ASCII without
# white space, '#', '=', '"' or backslash.  Shell characters are allowed:
# every value reaches a shell quoted.  A ';' in the *name* fails the login
# (LIO 6.1 with open-iscsi 2.1.8: "authorization failure"), measured on the
# guests with each printable character in turn; in the secret it works.
_CHAP = r"^[!$-<>-\[\]-~]+$"
_CHAP_NAME = r"^[!$-:<>-\[\]-~]+$"
# An NVMe DH-HMAC-CHAP secret as nvme gen-dhchap-key prints it: DHHC-1, the
# hash it is transformed with (00 none, 01-03 SHA-256/384/512), then the
# base64 of a 32-, 48- or 64-byte key and its CRC-32.
_DHCHAP = r"^DHHC-1:0[0-3]:[A-Za-z0-9+/]{44,92}={0,2}:$"
# An NVMe/TCP configured PSK in the interchange format (NVMe/TCP transport
# spec 3.6.1.5): NVMeTLSkey-1, the hash (01 SHA-256, 02 SHA-384), then the
# base64 of a 32- or 48-byte key and its CRC-32.
_TLS_PSK = r"^NVMeTLSkey-1:0[12]:[A-Za-z0-9+/]{48,72}={0,2}:$"
_TEXT_LINE = r"^[^\x00-\x1f\x7f]*$"
# Where ssh goes: [USER@]HOST (ssh_options.py, with every other ssh grammar).
_SSH = DESTINATION
# A network interface's name as Linux allows it (IFNAMSIZ 16), or an RDMA device's.
_IFNAME = r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,14}$"
# A block device to serve: a path under /dev, nothing else.
_DEVICE = r"^/dev/[A-Za-z0-9_][A-Za-z0-9/_.:-]{0,120}$"
_FILE_PATH = r"^[^\x00-\x1f\x7f]{1,250}$"
# What each pattern means, for error messages.
PATTERN_HINTS = {
    _HOST_NAME: "lower-case letters, digits and '-', starting with a letter, at most 31",
    _LABEL: "letters, digits, space and . _ + -, at most 64",
    _PROFILE: "a profile name such as modern-100g, or a path ending in .yaml",
    _CHAP: "printable ASCII without spaces, '#', '=', '\"' or backslash",
    _CHAP_NAME: "printable ASCII without spaces, ';', '#', '=', '\"' or backslash",
    _DHCHAP: "a DH-HMAC-CHAP secret as 'nvme gen-dhchap-key' prints it: DHHC-1:0N:<base64>:",
    _TLS_PSK: "a configured PSK as 'nvme gen-tls-key' prints it: NVMeTLSkey-1:0N:<base64>:",
    _TEXT_LINE: "one line of text",
    _SSH: DESTINATION_HINT,
    _IFNAME: "an interface or RDMA device name: letters, digits, '_', '.', ':' and '-', at most 15",
    _DEVICE: "a block device path under /dev, such as /dev/nvme1n1",
    _FILE_PATH: "a file path on one line",
}


def _no_parent_steps(path: str) -> str:
    """A device path stays under /dev: '..' would lead anywhere."""
    if ".." in path.split("/"):
        raise ValueError(f"{path!r} climbs out of /dev with '..'")
    return path


HostName = Annotated[str, Field(pattern=_HOST_NAME)]
Label = Annotated[str, Field(pattern=_LABEL)]
ProfileRef = Annotated[str, Field(pattern=_PROFILE)]
ChapText = Annotated[str, Field(pattern=_CHAP)]
ChapName = Annotated[str, Field(pattern=_CHAP_NAME)]
# The pattern says the shape (and goes into schema.json); nvme_keys.py checks what nvme-cli
# checks: the key's length for its hash, and its CRC-32.
DhchapSecret = Annotated[str, Field(pattern=_DHCHAP), AfterValidator(check_dhchap_secret)]
TlsPsk = Annotated[str, Field(pattern=_TLS_PSK), AfterValidator(check_tls_psk)]
SshDestination = Annotated[str, Field(pattern=_SSH)]
InterfaceName = Annotated[str, Field(pattern=_IFNAME)]
DevicePath = Annotated[str, Field(pattern=_DEVICE), AfterValidator(_no_parent_steps)]
FilePath = Annotated[str, Field(pattern=_FILE_PATH)]
# One ssh -o option: only those ssh_options.py allows, each value in its grammar (anything
# not text too, in the same words).  The JSON schema gives editors the shape; check_option
# is the rule.
SshOption = Annotated[
    str, BeforeValidator(check_option), WithJsonSchema({"type": "string", "pattern": OPTION_SHAPE})
]
# A private key for ssh -i: a path in ssh_options.py's grammar, of a regular, readable file.
SshKeyFile = Annotated[
    str, BeforeValidator(check_key_file), WithJsonSchema({"type": "string", "pattern": KEY_FILE_SHAPE})
]


def _yaml_null_is_null_device(value: Any) -> Any:
    """``backstore: null`` means the null device, though YAML reads it as nothing."""
    return "null" if value is None else value


def _as_list(value: Any) -> Any:
    """Let a matrix axis be written as one value or as a list of values."""
    return value if isinstance(value, list) else [value]


def _admits_bool(annotation: Any) -> bool:
    """Whether a field's type takes a yes/no anywhere in it (``bool``, ``bool | None``, ...)."""
    if annotation is bool:
        return True
    return any(_admits_bool(arg) for arg in get_args(annotation))


def _shown_briefly(value: Any) -> str:
    """A value as a one-line error shows it: quoted, cut to 40 characters."""
    return repr(value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "...")


def _not_a_yes_no(value: Any) -> str:
    """What is wrong with a value where a yes/no belongs, in words."""
    kind = {str: "a string", int: "a number", float: "a number", list: "a list", type(None): "empty"}
    shown = "null" if value is None else _shown_briefly(value)
    return f"{shown} is {kind.get(type(value), 'not a yes/no')}, not a valid boolean: write true or false"


def _leaf_types(annotation: Any) -> set[Any]:
    """The types a field's annotation is made of (through ``Annotated`` and ``|``)."""
    args = get_args(annotation)
    if get_origin(annotation) is Annotated:
        return _leaf_types(args[0])
    if get_origin(annotation) in (Union, UnionType):
        return set().union(*(_leaf_types(arg) for arg in args))
    return {annotation}


def _yes_no_only(annotation: Any) -> bool:
    """Whether a field takes a yes/no and no text or number (``bool``, ``bool | NvmeTls``): then
    pydantic's lax reading of ``"yes"``, ``"on"`` or ``1`` as true is a wrong accept."""
    leaves = _leaf_types(annotation)
    others = leaves - {bool, type(None)}
    return bool in leaves and all(isinstance(t, type) and issubclass(t, BaseModel) for t in others)


def _parses_its_own(field: FieldInfo) -> bool:
    """A field with a parser of its own (a size, a duration) names a yes/no in its own words."""
    return any(isinstance(m, BeforeValidator) and m.func is not _as_list for m in field.metadata)


class Strict(BaseModel):
    """Base for every scenario section: unknown fields are mistakes, and so is a yes/no where a
    number belongs (pydantic would read ``cpus: true`` as 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        items = value if isinstance(value, list) else [value]
        boolean = any(isinstance(v, bool) for v in items)
        field = cls.model_fields.get(info.field_name or "")
        if boolean and field and not _admits_bool(field.annotation) and not _parses_its_own(field):
            raise ValueError("is a yes/no (true/false); a number or a name belongs here")
        return value

    @field_validator("*", mode="before")
    @classmethod
    def _only_a_yes_no_for_a_yes_no(cls, value: Any, info: ValidationInfo) -> Any:
        """A yes/no is YAML's true or false, never a string or a number (``tls: "yes"``,
        ``tls: 1``).  YAML 1.1's unquoted yes/no/on/off are booleans to the YAML reader
        already, and are taken as such, like true/false."""
        field = cls.model_fields.get(info.field_name or "")
        scalar = isinstance(value, (str, int, float)) and not isinstance(value, bool)
        if field and scalar and _yes_no_only(field.annotation):
            raise ValueError(_not_a_yes_no(value))
        return value


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
    backstore: Annotated[Backstore, BeforeValidator(_yaml_null_is_null_device)] = "ramdisk"
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

    @field_validator("tls", mode="wrap")
    @classmethod
    def _tls_read_one_way(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A mapping is a PSK setting and nothing else: its mistakes are said once, at its own
        fields, not beside a "not a valid boolean" from the other reading of ``tls``."""
        if isinstance(value, dict):
            return NvmeTls.model_validate(value)
        if not isinstance(value, bool):
            raise ValueError(_not_a_yes_no(value) + " (or {psk: NVMeTLSkey-1:...})")
        return handler(value)


class Workload(Strict):
    """A fio matrix: every combination of rw x bs x iodepth x numjobs is a point."""

    name: Label | None = None
    rw: Annotated[list[ReadWrite], BeforeValidator(_as_list), Field(min_length=1, max_length=4)]
    bs: Annotated[list[BlockSize], BeforeValidator(_as_list), Field(min_length=1, max_length=MAX_AXIS)]
    iodepth: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_IODEPTH)]],
        BeforeValidator(_as_list),
        Field(min_length=1, max_length=MAX_AXIS),
    ] = [1]
    numjobs: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_NUMJOBS)]],
        BeforeValidator(_as_list),
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

    ``at`` counts from the start of the point's fio run.  ``down`` takes both
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


class Projection(Strict):
    """A hardware set-up onto which the models project the workloads.

    Unset fields come from the profile (link rate, MTU, target stack) or from
    the scenario's targets (transport).
    """

    profile: ProfileRef = DEFAULT_PROFILE
    label: Annotated[str, Field(max_length=80, pattern=_TEXT_LINE)] | None = None
    transport: Transport | None = None
    fabric: Fabric | None = None
    link_gbps: float | None = Field(None, gt=0, le=800)
    mtu: int | None = Field(None, ge=576, le=9000)
    target_stack: Stack | None = None
    backend: Annotated[Backend | None, BeforeValidator(_yaml_null_is_null_device)] = None
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


class Scenario(Strict):
    """A whole lab: hosts, links, targets, workloads, capture and projections."""

    name: Label | None = None
    description: Annotated[str, Field(max_length=2000)] = ""
    # The guest image every VM boots (scenarios/registry.py's GUESTS).
    guest: GuestName = DEFAULT_GUEST
    hosts: Annotated[list[Host], Field(max_length=MAX_HOSTS)] = []
    switches: Annotated[list[Switch], Field(max_length=MAX_SWITCHES)] = []
    links: Annotated[list[Link], Field(max_length=64)] = []
    targets: Annotated[list[Target], Field(max_length=64)] = []
    workloads: Annotated[list[Workload], Field(max_length=32)] = []
    capture: bool = False
    faults: Annotated[list[Fault], Field(max_length=16)] = []
    background: Annotated[list[Flow], Field(max_length=8)] = []
    projections: Annotated[list[Projection], Field(max_length=256)] = []

    @cached_property
    def plan(self) -> Plan:
        """This scenario resolved once: names, link kinds, target placements (scenarios/plan.py)."""
        from sanlab.scenarios.plan import resolve  # plan.py reads this module's classes

        return resolve(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Scenario:
        """A copy whose plan is worked out afresh: ``update`` may change what it follows from."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("plan", None)
        return copy

    @model_validator(mode="after")
    def _declares_something(self) -> Scenario:
        if not (self.hosts or self.projections):
            raise ValueError("declares neither hosts nor projections: nothing to run or project")
        return self


def schema_text() -> str:
    """The JSON schema of a scenario file, as committed in schema.json."""
    return json.dumps(Scenario.model_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    sys.stdout.write(schema_text())

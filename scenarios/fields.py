"""The scenario file's field types: names, sizes, patterns and the strict base every section
shares.

What a value may be (a host name, a size, a CHAP secret, an ssh option) is said once here,
with the hint an error message gives for each pattern; the sections (parts.py) and the
whole scenario (schema.py) are built from these types.
"""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic.fields import FieldInfo

from sanlab.scenarios.nvme_keys import check_dhchap_secret, check_tls_psk
from sanlab.scenarios.registry import FabricName, RdmaDriverName, StackName, TransportName
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
TEXT_LINE = r"^[^\x00-\x1f\x7f]*$"
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
    TEXT_LINE: "one line of text",
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


def yaml_null_is_null_device(value: Any) -> Any:
    """``backstore: null`` means the null device, though YAML reads it as nothing."""
    return "null" if value is None else value


def as_list(value: Any) -> Any:
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


def not_a_yes_no(value: Any) -> str:
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
    return any(isinstance(m, BeforeValidator) and m.func is not as_list for m in field.metadata)


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
            raise ValueError(not_a_yes_no(value))
        return value

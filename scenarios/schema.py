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
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from sanlab.scenarios.sizes import parse_duration, parse_percent, parse_rate, parse_size

Fabric = Literal["eth", "roce", "iwarp", "ib"]
RdmaDriver = Literal["rxe", "siw"]
Stack = Literal["lio", "tgt", "nvmet", "scst", "spdk"]
Transport = Literal["iscsi", "iser", "srp", "nvme-tcp", "nvme-rdma"]
Backstore = Literal["ramdisk", "null", "file"]
Backend = Literal["null", "ramdisk", "nvme"]
ReadWrite = Literal["read", "write", "randread", "randwrite"]
Role = Literal["initiator", "target"]

FABRICS: tuple[str, ...] = Fabric.__args__  # type: ignore[attr-defined]
TRANSPORTS: tuple[str, ...] = Transport.__args__  # type: ignore[attr-defined]
STACKS: tuple[str, ...] = Stack.__args__  # type: ignore[attr-defined]

_SIZE_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]}
Size = Annotated[int, BeforeValidator(parse_size), WithJsonSchema(_SIZE_SCHEMA)]
Seconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}]}),
]
BitsPerSecond = Annotated[float, BeforeValidator(parse_rate), WithJsonSchema({"type": "string"})]
Percent = Annotated[
    float,
    BeforeValidator(parse_percent),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}]}),
]
HostName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")]


def _yaml_null_is_null_device(value: Any) -> Any:
    """``backstore: null`` means the null device, though YAML reads it as nothing."""
    return "null" if value is None else value


def _as_list(value: Any) -> Any:
    """Let a matrix axis be written as one value or as a list of values."""
    return value if isinstance(value, list) else [value]


class Strict(BaseModel):
    """Base for every scenario section: unknown fields are mistakes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Host(Strict):
    """A VM (or, later, a real machine) that plays one role."""

    name: HostName
    role: Role
    cpus: int = Field(1, ge=1, le=16)
    memory: Size = 1 << 30


class Link(Strict):
    """A point-to-point link; with RDMA it carries a soft-RDMA device too."""

    name: HostName | None = None
    endpoints: list[HostName] = Field(min_length=2, max_length=2)
    fabric: Fabric = "eth"
    rdma_driver: RdmaDriver | None = None
    rate: BitsPerSecond | None = None
    delay: Seconds = 0.0
    loss: Percent = 0.0
    mtu: int = Field(1500, ge=576, le=9000)


class Chap(Strict):
    """One-way CHAP credentials for iSCSI and iSER logins."""

    username: str = Field(min_length=1)
    password: str = Field(min_length=12, max_length=16)


class Target(Strict):
    """A storage target on a host and the transport it exports over."""

    name: HostName | None = None
    host: HostName
    stack: Stack
    transport: Transport
    link: HostName | None = None
    backstore: Annotated[Backstore, BeforeValidator(_yaml_null_is_null_device)] = "ramdisk"
    size: Size = 64 << 20
    luns: int = Field(1, ge=1, le=16)
    header_digest: bool = False
    data_digest: bool = False
    chap: Chap | None = None


class Workload(Strict):
    """A fio matrix: every combination of rw x bs x iodepth x numjobs is a point."""

    name: str | None = None
    rw: Annotated[list[ReadWrite], BeforeValidator(_as_list), Field(min_length=1)]
    bs: Annotated[list[Size], BeforeValidator(_as_list), Field(min_length=1)]
    iodepth: Annotated[list[Annotated[int, Field(ge=1, le=4096)]], BeforeValidator(_as_list)] = [1]
    numjobs: Annotated[list[Annotated[int, Field(ge=1, le=256)]], BeforeValidator(_as_list)] = [1]
    runtime: Seconds = 10.0
    verify: Literal["crc32c", "off"] = "off"
    transports: list[Transport] | None = None


class Projection(Strict):
    """A hardware set-up onto which the models project the workloads.

    Unset fields come from the profile (link rate, MTU, target stack) or from
    the scenario's targets (transport).
    """

    profile: str = "modern-100g"
    label: str | None = None
    transport: Transport | None = None
    fabric: Fabric | None = None
    link_gbps: float | None = Field(None, gt=0, le=800)
    mtu: int | None = Field(None, ge=576, le=9000)
    target_stack: Stack | None = None
    backend: Annotated[Backend | None, BeforeValidator(_yaml_null_is_null_device)] = None
    sessions: int | None = Field(None, ge=1, le=256)
    header_digest: bool = False
    data_digest: bool = False


class Scenario(Strict):
    """A whole lab: hosts, links, targets, workloads, capture and projections."""

    name: str | None = None
    description: str = ""
    hosts: list[Host] = []
    links: list[Link] = []
    targets: list[Target] = []
    workloads: list[Workload] = []
    capture: bool = False
    projections: list[Projection] = []


def schema_text() -> str:
    """The JSON schema of a scenario file, as committed in schema.json."""
    return json.dumps(Scenario.model_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    sys.stdout.write(schema_text())

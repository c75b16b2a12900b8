"""Values that cross sandboxd's layers: frozen, typed, free of protobuf.

The gRPC layer converts these to and from messages (``sandboxd.contract.convert``);
runtime_client hands the very same classes to its callers.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar

# Re-exported: callers take every model from here.
from sandboxd.contract.network import NetworkDecision as NetworkDecision
from sandboxd.contract.network import NetworkPolicy as NetworkPolicy
from sandboxd.contract.network import coerce
from sandboxd.contract.secrets import Secret


def _frozen_map(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # the client supports 3.10; str() and format() of a member are its value, as in 3.11

    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str(self.value).__format__(spec)


class Runtime(StrEnum):
    RUNC = "runc"
    RUNSC = "runsc"


class FileType(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


@dataclass(frozen=True)
class SandboxOptions:
    """What a caller asks for. Zero / empty / None means "the daemon's default";
    a create of an existing id compares only what the caller set."""

    image: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = ""
    memory_bytes: int = 0
    cpus: float = 0.0
    pids_limit: int = 0
    #: Where the sandbox may connect (None: the daemon's default, mode none).
    #: The earlier bool is still taken here: True is mode full, False none.
    network: NetworkPolicy | None = None
    runtime: Runtime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    idle_ttl_seconds: int = 0
    disable_read_guard: bool | None = None
    #: Calls' processes may trace each other (off: each call apart; SECURITY.md).
    allow_ptrace: bool | None = None
    #: Deleted this long after its creation (0: the daemon's default).
    max_lifetime_seconds: int = 0
    #: A stopped sandbox is deleted this long after it stopped (0: the daemon's default).
    delete_after_stopped_seconds: int = 0
    #: The workspace's own disk size (0: the daemon's default).
    disk_bytes: int = 0
    #: Secrets the sandbox uses through placeholders (contract/secrets.py); their
    #: values are write-only: never in to_json, so never in labels or GetSandbox.
    secrets: tuple[Secret, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", _frozen_map(self.env))
        object.__setattr__(self, "labels", _frozen_map(self.labels))
        object.__setattr__(self, "secrets", tuple(self.secrets))
        object.__setattr__(self, "network", coerce(self.network))

    def to_json(self) -> dict[str, object]:
        return {
            "image": self.image,
            "env": dict(self.env),
            "workdir": self.workdir,
            "memory_bytes": self.memory_bytes,
            "cpus": self.cpus,
            "pids_limit": self.pids_limit,
            "network": self.network.to_json() if self.network else None,
            "runtime": self.runtime.value if self.runtime else None,
            "labels": dict(self.labels),
            "idle_ttl_seconds": self.idle_ttl_seconds,
            "disable_read_guard": self.disable_read_guard,
            "allow_ptrace": self.allow_ptrace,
            "max_lifetime_seconds": self.max_lifetime_seconds,
            "delete_after_stopped_seconds": self.delete_after_stopped_seconds,
            "disk_bytes": self.disk_bytes,
            "secrets": [secret.to_json() for secret in self.secrets],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SandboxOptions:
        runtime = data.get("runtime")
        return cls(
            image=str(data.get("image", "")),
            env={str(k): str(v) for k, v in _as_mapping(data.get("env")).items()},
            workdir=str(data.get("workdir", "")),
            memory_bytes=int(_as_number(data.get("memory_bytes", 0))),
            cpus=float(_as_number(data.get("cpus", 0.0))),
            pids_limit=int(_as_number(data.get("pids_limit", 0))),
            network=coerce(data.get("network")),  # type: ignore[arg-type]  # checked there
            runtime=Runtime(str(runtime)) if runtime else None,
            labels={str(k): str(v) for k, v in _as_mapping(data.get("labels")).items()},
            idle_ttl_seconds=int(_as_number(data.get("idle_ttl_seconds", 0))),
            disable_read_guard=_as_flag(data.get("disable_read_guard")),
            allow_ptrace=_as_flag(data.get("allow_ptrace")),
            max_lifetime_seconds=int(_as_number(data.get("max_lifetime_seconds", 0))),
            delete_after_stopped_seconds=int(
                _as_number(data.get("delete_after_stopped_seconds", 0))
            ),
            disk_bytes=int(_as_number(data.get("disk_bytes", 0))),
            secrets=tuple(
                Secret.from_json(item)
                for item in _as_list(data.get("secrets"))
                if isinstance(item, Mapping)
            ),
        )


def _as_mapping(value: object) -> Mapping[object, object]:
    return value if isinstance(value, Mapping) else {}


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def _as_flag(value: object) -> bool | None:
    return None if value is None else bool(value)


def _as_number(value: object) -> float:
    return float(value) if isinstance(value, int | float | str) else 0.0


class TerminationReason(StrEnum):
    """Why a sandbox is stopped or expired (``SandboxInfo.termination_reason``)."""

    LIFETIME = "lifetime"  # its max_lifetime ran out: deleted
    IDLE = "idle"  # stopped after idle_ttl without calls
    OUT_OF_MEMORY = "out_of_memory"  # the engine's OOM killer ended it
    KILLED = "killed"  # stopped from outside sandboxd (the engine lost, docker stop)
    EXITED = "exited"  # its init ended by itself
    DELETED = "deleted"  # its caller deleted it (said by the NotFound that follows)


@dataclass(frozen=True)
class SandboxInfo:
    instance_id: str
    state: str  # running | stopped | expired | missing
    container_id: str
    volume: str
    options: SandboxOptions  # effective: defaults filled in
    created_at_ms: int
    #: When the daemon deletes it (ms since the epoch); 0: no lifetime.
    expires_at_ms: int = 0
    #: A ``TerminationReason`` value for a stopped or expired sandbox, else "".
    termination_reason: str = ""

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the caller should know about this sandbox (its network mode full),
        derived from its options so it never goes stale."""
        warning = self.options.network.warning if self.options.network else ""
        return (warning,) if warning else ()


@dataclass(frozen=True)
class FileInfo:
    path: str
    name: str
    type: FileType
    size: int
    mode: int
    mtime_ns: int
    symlink_target: str = ""


@dataclass(frozen=True)
class ReadFileResult:
    data: bytes
    size: int  # of the whole file
    eof: bool


@dataclass(frozen=True)
class WriteFileResult:
    size: int
    sha256: str
    created: bool


@dataclass(frozen=True)
class ExistsResult:
    exists: bool
    type: FileType | None


@dataclass(frozen=True)
class ExecRequest:
    """One process run. Exactly one of ``argv`` and ``shell`` is set."""

    argv: tuple[str, ...] | None = None
    shell: str | None = None
    cwd: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes = b""
    timeout_ms: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", _frozen_map(self.env))


@dataclass(frozen=True)
class ExecResult:
    stdout: bytes
    stderr: bytes
    exit_code: int  # -N: killed by signal N
    timed_out: bool
    duration_ms: int
    stdout_truncated: bool = False
    stderr_truncated: bool = False


@dataclass(frozen=True)
class ExecOutput:
    """A chunk of output from a streaming exec, in the order it was produced."""

    stream: str  # "stdout" | "stderr"
    data: bytes


@dataclass(frozen=True)
class ExecExit:
    exit_code: int
    timed_out: bool
    duration_ms: int


ExecEvent = ExecOutput | ExecExit


@dataclass(frozen=True)
class SandboxToolResult:
    """What a tool returns: the model-facing ``text``, ``is_error``, and the
    same facts as structured ``fields`` (counts, truncation, exit code...)."""

    text: str
    is_error: bool
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))


@dataclass(frozen=True)
class PoolStatus:
    size: int = 0
    ready: int = 0
    served: int = 0
    started: int = 0


@dataclass(frozen=True)
class RuntimeInfo:
    """A container runtime as the engine offers it (see GetStatus)."""

    name: str
    version: str = ""
    platform: str = ""
    available: bool = False


@dataclass(frozen=True)
class DiskLimit:
    """Whether each new workspace gets a disk of its own (see GetStatus)."""

    enforced: bool = False
    #: The size of each workspace's disk; 0 when not enforced.
    bytes: int = 0
    #: Why not enforced ("" when it is): configured off, or what the host lacks.
    reason: str = ""


@dataclass(frozen=True)
class ServerStatus:
    version: str
    backend: str
    namespace: str
    pool: PoolStatus
    runtimes: tuple[RuntimeInfo, ...] = ()
    disk: DiskLimit = DiskLimit()
    tenants: tuple[TenantUsage, ...] = ()


@dataclass(frozen=True)
class QuotaUse:
    name: str  # sandboxes | memory_bytes | cpus | disk_bytes | creates_per_minute
    used: float
    limit: float  # 0: no quota


@dataclass(frozen=True)
class TenantUsage:
    tenant: str
    quotas: tuple[QuotaUse, ...] = ()


# ---------------------------------------------------------------- transfers


@dataclass(frozen=True)
class DownloadDone:
    """The end of a download: bytes sent and their sha256."""

    size: int
    sha256: str
    file_size: int  # the whole file's size when the download began


@dataclass(frozen=True)
class SkippedLink:
    """A symlink a tree extraction left out, and why (it would resolve outside)."""

    path: str  # relative to the target
    target: str
    reason: str


@dataclass(frozen=True)
class TreeUploadResult:
    files: int
    directories: int
    symlinks: int
    bytes: int
    skipped_links: tuple[SkippedLink, ...] = ()  # the first 100
    links_skipped: int = 0  # how many in all


@dataclass(frozen=True)
class TreeDownloadDone:
    entries: int
    bytes: int
    skipped: int  # sockets, FIFOs, devices, and files that vanished meanwhile


#: How a fork's files were copied (``ForkResult.method``): the whole disk image
#: cloned copy-on-write or copied sparsely (disk-image volumes, O(data)), or
#: the files reflinked or copied one by one (plain volumes, O(files)), or (the
#: kubernetes backend) a new claim cloned from the source's by its storage
#: class (PVC ``dataSource``).
FORK_METHODS = ("image-reflink", "image-copy", "reflink", "copy", "volume-clone")


@dataclass(frozen=True)
class ForkResult:
    sandbox: SandboxInfo
    method: str  # one of FORK_METHODS
    duration_ms: int


#: How a snapshot was copied (``SnapshotInfo.method``) and how a restore
#: copied it back: a disk-image workspace's whole image, cloned copy-on-write
#: or copied sparsely (O(data)); or the files one by one, reflinked where the
#: host's file system can share blocks, copied otherwise (O(files)).
SNAPSHOT_METHODS = ("image-reflink", "image-copy", "reflink", "copy")


@dataclass(frozen=True)
class SnapshotInfo:
    """A named snapshot: a workspace's files at one moment and the options its
    sandbox had (a sandbox made from it starts with them)."""

    name: str
    source_id: str  # the sandbox it was taken of
    size_bytes: int  # its files' bytes, counted against the tenant's disk quota
    created_at_ms: int
    method: str  # one of SNAPSHOT_METHODS
    duration_ms: int
    options: SandboxOptions

    def to_json(self) -> dict[str, object]:
        """As JSON: the note kept with a snapshot, and sandboxctl's --json."""
        values = {item.name: getattr(self, item.name) for item in fields(self)}
        return {**values, "options": self.options.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SnapshotInfo:
        return cls(
            name=str(data["name"]),
            source_id=str(data["source_id"]),
            size_bytes=int(_as_number(data["size_bytes"])),
            created_at_ms=int(_as_number(data["created_at_ms"])),
            method=str(data["method"]),
            duration_ms=int(_as_number(data["duration_ms"])),
            options=SandboxOptions.from_json(
                {str(k): v for k, v in _as_mapping(data.get("options")).items()}
            ),
        )


@dataclass(frozen=True)
class TemplateInfo:
    """A template: an image built from a Dockerfile through the daemon."""

    image: str  # the tag to create sandboxes with
    cached: bool  # built before from the same content: nothing ran
    duration_ms: int
    size_bytes: int


@dataclass(frozen=True)
class ToolDescription:
    """What a model is told about one tool (ListTools, GET /v1/tools)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


# ---------------------------------------------------------------- processes


@dataclass(frozen=True)
class ProcessRequest:
    """A long-lived process to start: exactly one of ``argv`` and ``shell``."""

    argv: tuple[str, ...] | None = None
    shell: str | None = None
    cwd: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    #: (rows, cols) of a pseudo-terminal to run it on; None: pipes.
    pty: tuple[int, int] | None = None


@dataclass(frozen=True)
class ListeningPort:
    """A TCP port something listens on inside a sandbox."""

    host: str
    port: int

    #: Entries taken from one answer at most (it comes from inside the sandbox).
    MAX: ClassVar[int] = 4096

    @classmethod
    def list_from_raw(cls, raw: object) -> list[ListeningPort]:
        """From the executor's answer, which comes from inside the sandbox: checked."""
        if not isinstance(raw, list):
            return []
        out = []
        for item in raw[: cls.MAX]:
            if isinstance(item, Mapping):
                host, port = item.get("host"), item.get("port")
                if isinstance(host, str) and isinstance(port, int) and 0 < port < 65536:
                    out.append(cls(host=host[:64], port=port))
        return out


@dataclass(frozen=True)
class Preview:
    """A preview token for one port of a sandbox, and where it opens it."""

    token: str
    expires_at: int  # unix seconds
    path: str  # the signed URL's path on the HTTP listener, token included
    host: str  # {port}-{id}.<preview domain>, or "" without one


@dataclass(frozen=True)
class ProcessInfo:
    handle: str
    pid: int
    command: tuple[str, ...]
    state: str  # "running" | "exited"
    exit_code: int | None  # 128+N when killed by signal N
    signal: int | None
    pty: bool
    started: float
    output_bytes: int
    log_path: str

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> ProcessInfo:
        """From the executor's answer, which comes from inside the sandbox: checked."""
        command = raw.get("command")
        exit_code, sig = raw.get("exit_code"), raw.get("signal")
        state = raw.get("state")
        return cls(
            handle=str(raw.get("handle", ""))[:64],
            pid=_whole(raw.get("pid")),
            command=tuple(str(c) for c in command[:1000]) if isinstance(command, list) else (),
            state=state if state in ("running", "exited") else "exited",
            exit_code=exit_code if isinstance(exit_code, int) else None,
            signal=sig if isinstance(sig, int) else None,
            pty=bool(raw.get("pty")),
            started=float(started)
            if isinstance(started := raw.get("started"), int | float)
            else 0.0,
            output_bytes=_whole(raw.get("output_bytes")),
            log_path=str(raw.get("log_path", ""))[:4096],
        )


def _whole(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class ProcessChunk:
    """Output of a process: ``offset`` is that of ``data``'s first byte."""

    stream: str  # "stdout" | "stderr"
    data: bytes
    offset: int


@dataclass(frozen=True)
class ProcessExit:
    """The last event of an attachment: the process is done, its output all sent."""

    info: ProcessInfo
    missed: int  # bytes that aged out of the executor's buffer before this client read them
    offset: int


ProcessEvent = ProcessChunk | ProcessExit

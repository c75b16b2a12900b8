"""JSON shapes of the HTTP API, and their conversion to and from ``sandboxd.contract.models``.

Requests forbid unknown fields (a misspelt option must not pass silently, as
on gRPC). Bytes travel base64-encoded in fields named ``*_base64``. Value
rules (id syntax, limits, ...) are not repeated here: the service checks
them, so both transports give the same answer.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from sandboxd.contract import models, network
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.validation import INSTANCE_ID

# Published in the schema, checked by the service (so messages match gRPC's).
INSTANCE_ID_SCHEMA: dict[str, Any] = {
    "pattern": f"^{INSTANCE_ID.pattern}$",
    "examples": ["agent-1"],
}


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    code: str = Field(description="the gRPC status name, e.g. NOT_FOUND")
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


# ---------------------------------------------------------------- lifecycle


class Secret(_Request):
    """One secret the sandbox uses through a placeholder (README "Secrets")."""

    name: str
    value: SecretStr | None = Field(
        default=None, description="write-only: never in a response, a log or the sandbox"
    )
    hosts: list[str] = Field(description="hosts the value may go to: a.example.com, *.example.com")
    env: str = Field(default="", description="the workload's variable holding the placeholder")
    file: str = Field(default="", description="or an absolute path of a file holding it")


class NetworkPolicy(_Request):
    """Where a sandbox may connect (sandboxd/contract/network.py is the one model)."""

    mode: network.NetworkMode = Field(default="none", description=network.MODE_DESCRIPTION)
    allow: list[str] = Field(
        default=[], max_length=network.MAX_RULES, description=network.RULE_DESCRIPTION
    )
    deny: list[str] = Field(
        default=[], max_length=network.MAX_RULES, description="deny rules: they win over allow"
    )

    def to_model(self) -> models.NetworkPolicy:
        return models.NetworkPolicy.from_json(self.model_dump())

    @classmethod
    def from_model(cls, policy: models.NetworkPolicy) -> NetworkPolicy:
        return cls.model_validate(policy.to_json())


class SetNetworkPolicyRequest(_Request):
    policy: NetworkPolicy


class NetworkDecision(BaseModel):
    at_ms: int = Field(description="ms since the epoch")
    host: str = Field(description='the name asked for ("" for a bare address)')
    port: int
    address: str = Field(description='the address resolved and connected to ("" if none)')
    allowed: bool
    rule: str = Field(description='the deciding rule ("" when none matched)')
    reason: str = Field(description="the agent-facing text")
    via: str = Field(description="connect | http | socks")


class NetworkLogResponse(BaseModel):
    entries: list[NetworkDecision]


class SandboxOptions(_Request):
    """Unset (or zero) fields take the daemon's defaults."""

    image: str = ""
    env: dict[str, str] = {}
    workdir: str = ""
    memory_bytes: int = 0
    cpus: float = 0.0
    pids_limit: int = 0
    network: NetworkPolicy | bool | None = Field(
        default=None,
        description="the network policy (unset: mode none); the earlier true/false "
        "still mean mode full/none",
    )
    runtime: Literal["runc", "runsc"] | None = None
    labels: dict[str, str] = {}
    idle_ttl_seconds: int = 0
    disable_read_guard: bool | None = None
    allow_ptrace: bool | None = Field(
        default=None,
        description="let a call's processes ptrace another call's (gdb -p, strace -p); "
        "off: each call's processes are apart (SECURITY.md, issue 23 item 5)",
    )
    max_lifetime_seconds: int = Field(
        default=0, description="deleted this long after creation (0: the daemon's default)"
    )
    delete_after_stopped_seconds: int = Field(
        default=0,
        description="a stopped sandbox is deleted this long after it stopped "
        "(0: the daemon's default)",
    )
    disk_bytes: int = Field(
        default=0, description="the workspace's own disk size (0: the daemon's default)"
    )
    secrets: list[Secret] = Field(
        default=[], description="secrets used through placeholders; values never come back"
    )

    def to_model(self) -> models.SandboxOptions:
        # The fields mirror SandboxOptions.to_json, so its inverse converts; a
        # secret's value is the one field to_json leaves out, so it is put back.
        data = self.model_dump()
        data["secrets"] = [
            {
                **secret.model_dump(),
                "value": secret.value.get_secret_value() if secret.value else "",
            }
            for secret in self.secrets
        ]
        return models.SandboxOptions.from_json(data)

    @classmethod
    def from_model(cls, options: models.SandboxOptions) -> SandboxOptions:
        data = options.to_json()
        return cls.model_validate(data)


class CreateSandboxRequest(_Request):
    instance_id: str = Field(
        description="names the workspace; creating an existing id returns it",
        json_schema_extra=INSTANCE_ID_SCHEMA,
    )
    options: SandboxOptions | None = None


class ExtendSandboxRequest(_Request):
    seconds: int = Field(gt=0, description="the sandbox ends this long from now")


class Sandbox(BaseModel):
    instance_id: str
    state: str = Field(description="running | stopped | expired | missing")
    container_id: str
    volume: str
    options: SandboxOptions = Field(description="effective options, defaults filled in")
    created_at_ms: int
    expires_at_ms: int = Field(
        default=0, description="when the daemon deletes it (ms since the epoch); 0: never"
    )
    termination_reason: str = Field(
        default="",
        description="why a stopped or expired sandbox is so: lifetime | idle | "
        "out_of_memory | killed | exited",
    )
    warnings: list[str] = Field(
        default=[], description="what the caller should know (network mode full, ...)"
    )

    @classmethod
    def from_model(cls, info: models.SandboxInfo) -> Sandbox:
        return cls(
            instance_id=info.instance_id,
            state=info.state,
            container_id=info.container_id,
            volume=info.volume,
            options=SandboxOptions.from_model(info.options),
            created_at_ms=info.created_at_ms,
            expires_at_ms=info.expires_at_ms,
            termination_reason=info.termination_reason,
            warnings=list(info.warnings),
        )


class CreateSandboxResponse(BaseModel):
    sandbox: Sandbox
    created: bool = Field(description="false when the id already existed with compatible options")


class ListSandboxesResponse(BaseModel):
    sandboxes: list[Sandbox]


class DeleteSandboxResponse(BaseModel):
    deleted: bool


class PoolStatus(BaseModel):
    size: int
    ready: int
    served: int
    started: int


class RuntimeInfo(BaseModel):
    name: str
    version: str
    platform: str
    available: bool


class DiskLimit(BaseModel):
    enforced: bool = False
    bytes: int = 0
    reason: str = ""


class QuotaUse(BaseModel):
    name: str = Field(
        description="sandboxes | memory_bytes | cpus | disk_bytes | creates_per_minute"
    )
    used: float
    limit: float = Field(description="0: no quota")


class TenantUsage(BaseModel):
    tenant: str
    quotas: list[QuotaUse] = []


class ServerStatus(BaseModel):
    version: str
    backend: str
    namespace: str
    pool: PoolStatus
    runtimes: list[RuntimeInfo] = []
    disk: DiskLimit = DiskLimit()
    tenants: list[TenantUsage] = Field(
        default=[], description="use against quota: the caller's tenant, or every tenant"
    )

    @classmethod
    def from_model(cls, status: models.ServerStatus) -> ServerStatus:
        pool = status.pool
        return cls(
            version=status.version,
            backend=status.backend,
            namespace=status.namespace,
            pool=PoolStatus(
                size=pool.size, ready=pool.ready, served=pool.served, started=pool.started
            ),
            runtimes=[
                RuntimeInfo(
                    name=r.name, version=r.version, platform=r.platform, available=r.available
                )
                for r in status.runtimes
            ],
            disk=DiskLimit(
                enforced=status.disk.enforced, bytes=status.disk.bytes, reason=status.disk.reason
            ),
            tenants=[
                TenantUsage(
                    tenant=t.tenant,
                    quotas=[QuotaUse(name=q.name, used=q.used, limit=q.limit) for q in t.quotas],
                )
                for t in status.tenants
            ],
        )


class Probe(BaseModel):
    status: Literal["ok", "ready", "not ready"]


# ---------------------------------------------------------------- tools


class ToolCallRequest(_Request):
    arguments: dict[str, Any] | str = Field(
        default_factory=dict,
        description="the arguments exactly as the model produced them: an object, or its JSON text",
    )
    tool_call_id: str | None = Field(
        None,
        description="retry key: a write, edit or bash already completed under this id returns "
        "its recorded result instead of running again",
    )
    cwd: str | None = Field(
        None,
        description="the folder this call runs in (absolute, or relative to the workdir; an "
        "existing folder): relative paths and bash's starting folder resolve against it; "
        "bash's saved cwd is neither used nor changed. Empty or absent: the workdir",
    )


class ToolDescription(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="JSON schema (type: object) of the arguments")


class ListToolsResponse(BaseModel):
    tools: list[ToolDescription]

    @classmethod
    def from_models(cls, tools: list[models.ToolDescription]) -> ListToolsResponse:
        return cls(
            tools=[
                ToolDescription(
                    name=t.name, description=t.description, input_schema=dict(t.input_schema)
                )
                for t in tools
            ]
        )


class ToolCallResponse(BaseModel):
    text: str = Field(description="what the model sees")
    is_error: bool
    fields: dict[str, Any] = Field(description="the same facts, structured")


# ---------------------------------------------------------------- files


class ReadFileResponse(BaseModel):
    data_base64: str
    size: int = Field(description="size of the whole file")
    eof: bool


class WriteFileRequest(_Request):
    path: str
    data_base64: str
    create_parents: bool = False
    expected_sha256: str | None = Field(
        None, description='compare-and-swap: the current content\'s sha256, or "absent"'
    )
    mode: int | None = None


class WriteFileResponse(BaseModel):
    size: int
    sha256: str
    created: bool


class FileInfo(BaseModel):
    path: str
    name: str
    type: Literal["file", "directory", "symlink", "other"]
    size: int
    mode: int
    mtime_ns: int
    symlink_target: str = ""

    @classmethod
    def from_model(cls, info: models.FileInfo) -> FileInfo:
        return cls(
            path=info.path,
            name=info.name,
            type=info.type.value,
            size=info.size,
            mode=info.mode,
            mtime_ns=info.mtime_ns,
            symlink_target=info.symlink_target,
        )


class ListDirResponse(BaseModel):
    entries: list[FileInfo]


class ExistsResponse(BaseModel):
    exists: bool
    type: Literal["file", "directory", "symlink", "other"] | None


class MakeDirRequest(_Request):
    path: str
    parents: bool = False
    exist_ok: bool = False


class MakeDirResponse(BaseModel):
    created: bool


class RemoveRequest(_Request):
    path: str
    recursive: bool = False
    missing_ok: bool = False


class RemoveResponse(BaseModel):
    removed: bool


# ---------------------------------------------------------------- exec


class ExecRequest(_Request):
    """Exactly one of ``argv`` and ``shell``: a list runs as argv, a string under bash -c."""

    argv: list[str] | None = None
    shell: str | None = None
    cwd: str = ""
    env: dict[str, str] = {}
    stdin_base64: str = ""
    timeout_ms: int = Field(0, description="0: the daemon's default")

    def to_model(self) -> models.ExecRequest:
        return models.ExecRequest(
            argv=tuple(self.argv) if self.argv is not None else None,
            shell=self.shell,
            cwd=self.cwd,
            env=self.env,
            stdin=decode_base64(self.stdin_base64, "stdin_base64"),
            timeout_ms=self.timeout_ms,
        )


class ExecResponse(BaseModel):
    stdout_base64: str
    stderr_base64: str
    exit_code: int = Field(description="-N: killed by signal N")
    timed_out: bool
    duration_ms: int
    stdout_truncated: bool
    stderr_truncated: bool

    @classmethod
    def from_model(cls, result: models.ExecResult) -> ExecResponse:
        return cls(
            stdout_base64=encode_base64(result.stdout),
            stderr_base64=encode_base64(result.stderr),
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_ms=result.duration_ms,
            stdout_truncated=result.stdout_truncated,
            stderr_truncated=result.stderr_truncated,
        )


def encode_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_base64(text: str, field: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{field} must be standard base64") from None


class ExecExit(BaseModel):
    exit_code: int
    timed_out: bool
    duration_ms: int


class ExecStreamEvent(BaseModel):
    """One line of an exec stream: output as it is produced, then the exit (or an error)."""

    stream: Literal["stdout", "stderr"] | None = None
    data_base64: str | None = None
    exit: ExecExit | None = None
    error: ErrorDetail | None = None

    @classmethod
    def from_model(cls, event: models.ExecEvent) -> ExecStreamEvent:
        if isinstance(event, models.ExecOutput):
            return cls(stream=event.stream, data_base64=encode_base64(event.data))  # type: ignore[arg-type]
        return cls(
            exit=ExecExit(
                exit_code=event.exit_code,
                timed_out=event.timed_out,
                duration_ms=event.duration_ms,
            )
        )


# ---------------------------------------------------------------- processes


class TerminalSize(_Request):
    rows: int = Field(description="1-10000")
    cols: int = Field(description="1-10000")


class StartProcessRequest(_Request):
    """Exactly one of ``argv`` and ``shell``; ``pty`` runs it on a pseudo-terminal."""

    argv: list[str] | None = None
    shell: str | None = None
    cwd: str = ""
    env: dict[str, str] = {}
    pty: TerminalSize | None = None

    def to_model(self) -> models.ProcessRequest:
        return models.ProcessRequest(
            argv=tuple(self.argv) if self.argv is not None else None,
            shell=self.shell,
            cwd=self.cwd,
            env=self.env,
            pty=(self.pty.rows, self.pty.cols) if self.pty is not None else None,
        )


class ProcessInfo(BaseModel):
    handle: str = Field(description="e.g. proc_3, unique in the sandbox")
    pid: int
    command: list[str]
    state: Literal["running", "exited"]
    exit_code: int | None = Field(description="128+N when killed by signal N")
    signal: int | None
    pty: bool
    started: float = Field(description="unix time")
    output_bytes: int = Field(description="output so far: the offset of the next byte")
    log_path: str

    @classmethod
    def from_model(cls, info: models.ProcessInfo) -> ProcessInfo:
        return cls(
            handle=info.handle,
            pid=info.pid,
            command=list(info.command),
            state=info.state,  # type: ignore[arg-type]
            exit_code=info.exit_code,
            signal=info.signal,
            pty=info.pty,
            started=info.started,
            output_bytes=info.output_bytes,
            log_path=info.log_path,
        )


class ProcessList(BaseModel):
    processes: list[ProcessInfo]


class ProcessInput(_Request):
    """Bytes for the process's stdin (or terminal), then optionally its end."""

    data_base64: str = ""
    close: bool = Field(False, description="end the input after data (a terminal gets ^D)")


class ProcessInputResult(BaseModel):
    written: int


class ProcessSignal(_Request):
    signal: int = Field(description="1-64, e.g. 2 SIGINT, 15 SIGTERM, 9 SIGKILL")


class ProcessExit(BaseModel):
    info: ProcessInfo
    missed: int = Field(description="bytes that aged out before this client read them")
    offset: int = Field(description="the end of the output")


class ProcessOutputEvent(BaseModel):
    """One line of a process's output stream: chunks as produced, then the exit (or an error)."""

    stream: Literal["stdout", "stderr"] | None = None
    data_base64: str | None = None
    offset: int | None = Field(None, description="of the chunk's first byte")
    exit: ProcessExit | None = None
    error: ErrorDetail | None = None

    @classmethod
    def from_model(cls, event: models.ProcessEvent) -> ProcessOutputEvent:
        if isinstance(event, models.ProcessChunk):
            return cls(
                stream=event.stream,  # type: ignore[arg-type]
                data_base64=encode_base64(event.data),
                offset=event.offset,
            )
        return cls(
            exit=ProcessExit(
                info=ProcessInfo.from_model(event.info), missed=event.missed, offset=event.offset
            )
        )

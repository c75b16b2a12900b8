"""Protobuf <-> ``sandboxd.contract.models``, for the server and for runtime_client.

The only module besides the generated code that knows message layouts, so
protobuf never leaks past the transport on either side.
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypeVar

from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import (
    DiskLimit,
    ExecEvent,
    ExecExit,
    ExecOutput,
    ExecRequest,
    ExecResult,
    ExistsResult,
    FileInfo,
    FileType,
    ForkResult,
    ListeningPort,
    NetworkDecision,
    NetworkPolicy,
    PoolStatus,
    Preview,
    ProcessChunk,
    ProcessEvent,
    ProcessExit,
    ProcessInfo,
    ProcessRequest,
    QuotaUse,
    Runtime,
    RuntimeInfo,
    SandboxInfo,
    SandboxOptions,
    SandboxToolResult,
    ServerStatus,
    SkippedLink,
    SnapshotInfo,
    TemplateInfo,
    TenantUsage,
    ToolDescription,
    TreeUploadResult,
)
from sandboxd.contract.network import MODES, NetworkMode
from sandboxd.contract.secrets import Secret, SecretValue
from sandboxd.contract.v1 import sandbox_pb2 as pb

log = logging.getLogger(__name__)

_RUNTIME_TO_PB = {
    None: pb.RUNTIME_UNSPECIFIED,
    Runtime.RUNC: pb.RUNTIME_RUNC,
    Runtime.RUNSC: pb.RUNTIME_RUNSC,
}
_RUNTIME_FROM_PB = {v: k for k, v in _RUNTIME_TO_PB.items()}
_TYPE_TO_PB = {
    None: pb.FILE_TYPE_UNSPECIFIED,
    FileType.FILE: pb.FILE_TYPE_FILE,
    FileType.DIRECTORY: pb.FILE_TYPE_DIRECTORY,
    FileType.SYMLINK: pb.FILE_TYPE_SYMLINK,
    FileType.OTHER: pb.FILE_TYPE_OTHER,
}
_TYPE_FROM_PB = {v: k for k, v in _TYPE_TO_PB.items()}
# Every mode of contract.network.MODES has its NETWORK_MODE_<MODE> (a drift test checks).
_MODE_TO_PB: dict[str, pb.NetworkMode] = {
    "none": pb.NETWORK_MODE_NONE,
    "allow": pb.NETWORK_MODE_ALLOW,
    "full": pb.NETWORK_MODE_FULL,
}
_MODE_FROM_PB: dict[int, NetworkMode] = {
    pb.NETWORK_MODE_NONE: "none",
    pb.NETWORK_MODE_ALLOW: "allow",
    pb.NETWORK_MODE_FULL: "full",
}


def policy_to_pb(policy: NetworkPolicy) -> pb.NetworkPolicy:
    return pb.NetworkPolicy(
        mode=_MODE_TO_PB.get(policy.mode, pb.NETWORK_MODE_UNSPECIFIED),
        allow=list(policy.allow),
        deny=list(policy.deny),
    )


def policy_from_pb(message: pb.NetworkPolicy) -> NetworkPolicy:
    """An unknown mode number is refused, never taken for none or full."""
    mode: NetworkMode
    if message.mode == pb.NETWORK_MODE_UNSPECIFIED:
        mode = "none"
    elif message.mode in _MODE_FROM_PB:
        mode = _MODE_FROM_PB[message.mode]
    else:
        raise InvalidArgument(f"network.mode {message.mode} is not a mode: use {', '.join(MODES)}")
    return NetworkPolicy(mode=mode, allow=tuple(message.allow), deny=tuple(message.deny))


def decision_to_pb(entry: NetworkDecision) -> pb.NetworkDecision:
    return pb.NetworkDecision(
        at_ms=entry.at_ms,
        host=entry.host,
        port=entry.port,
        address=entry.address,
        allowed=entry.allowed,
        rule=entry.rule,
        reason=entry.reason,
        via=entry.via,
    )


def decision_from_pb(message: pb.NetworkDecision) -> NetworkDecision:
    return NetworkDecision(
        at_ms=message.at_ms,
        host=message.host,
        port=message.port,
        address=message.address,
        allowed=message.allowed,
        rule=message.rule,
        reason=message.reason,
        via=message.via,
    )


def options_to_pb(options: SandboxOptions, *, secret_values: bool = True) -> pb.SandboxOptions:
    """``secret_values``: a request carries them; a reply (``info_to_pb``) never does."""
    return pb.SandboxOptions(
        image=options.image,
        env=dict(options.env),
        workdir=options.workdir,
        memory_bytes=options.memory_bytes,
        cpus=options.cpus,
        pids_limit=options.pids_limit,
        network=policy_to_pb(options.network) if options.network else None,
        runtime=_RUNTIME_TO_PB[options.runtime],
        labels=dict(options.labels),
        idle_ttl_seconds=options.idle_ttl_seconds,
        disable_read_guard=options.disable_read_guard,
        allow_ptrace=options.allow_ptrace,
        max_lifetime_seconds=options.max_lifetime_seconds,
        delete_after_stopped_seconds=options.delete_after_stopped_seconds,
        disk_bytes=options.disk_bytes,
        secrets=[secret_to_pb(secret, value=secret_values) for secret in options.secrets],
    )


def secret_to_pb(secret: Secret, *, value: bool = True) -> pb.Secret:
    return pb.Secret(
        name=secret.name,
        value=secret.value.reveal() if value else "",
        hosts=list(secret.hosts),
        env=secret.env,
        file=secret.file,
    )


def secret_from_pb(message: pb.Secret) -> Secret:
    return Secret(
        name=message.name,
        value=SecretValue(message.value),
        hosts=tuple(message.hosts),
        env=message.env,
        file=message.file,
    )


def options_from_pb(message: pb.SandboxOptions, *, request: bool = True) -> SandboxOptions:
    """``request``: the options a caller asks for, where an enum value this
    side does not know is refused (proto3 keeps unknown enum numbers); options
    a daemon reports (``request=False``) may name a runtime only a newer one knows."""
    runtime = _RUNTIME_FROM_PB.get(message.runtime)
    if runtime is None and message.runtime != pb.RUNTIME_UNSPECIFIED and request:
        known = ", ".join(pb.Runtime.Name(value) for value in _RUNTIME_FROM_PB)
        raise InvalidArgument(f"options.runtime {message.runtime} is not a runtime: use {known}")
    return SandboxOptions(
        image=message.image,
        env=dict(message.env),
        workdir=message.workdir,
        memory_bytes=message.memory_bytes,
        cpus=message.cpus,
        pids_limit=message.pids_limit,
        network=policy_from_pb(message.network) if message.HasField("network") else None,
        runtime=runtime,
        labels=dict(message.labels),
        idle_ttl_seconds=message.idle_ttl_seconds,
        disable_read_guard=(
            message.disable_read_guard if message.HasField("disable_read_guard") else None
        ),
        allow_ptrace=message.allow_ptrace if message.HasField("allow_ptrace") else None,
        max_lifetime_seconds=message.max_lifetime_seconds,
        delete_after_stopped_seconds=message.delete_after_stopped_seconds,
        disk_bytes=message.disk_bytes,
        secrets=tuple(secret_from_pb(secret) for secret in message.secrets),
    )


def info_to_pb(info: SandboxInfo) -> pb.SandboxInfo:
    return pb.SandboxInfo(
        instance_id=info.instance_id,
        state=info.state,
        container_id=info.container_id,
        volume=info.volume,
        options=options_to_pb(info.options, secret_values=False),
        created_at_ms=info.created_at_ms,
        expires_at_ms=info.expires_at_ms,
        termination_reason=info.termination_reason,
        warnings=list(info.warnings),
    )


def info_from_pb(message: pb.SandboxInfo) -> SandboxInfo:
    return SandboxInfo(
        instance_id=message.instance_id,
        state=message.state,
        container_id=message.container_id,
        volume=message.volume,
        options=options_from_pb(message.options, request=False),
        created_at_ms=message.created_at_ms,
        expires_at_ms=message.expires_at_ms,
        termination_reason=message.termination_reason,
    )


def copied_to_pb(result: ForkResult, message: Any) -> Any:
    """A fork's answer, or a restore's or a create-from-snapshot's (the same fields)."""
    return message(
        sandbox=info_to_pb(result.sandbox), method=result.method, duration_ms=result.duration_ms
    )


def copied_from_pb(message: Any) -> ForkResult:
    return ForkResult(
        sandbox=info_from_pb(message.sandbox),
        method=message.method,
        duration_ms=message.duration_ms,
    )


def template_to_pb(template: TemplateInfo) -> pb.TemplateInfo:
    return pb.TemplateInfo(
        image=template.image,
        cached=template.cached,
        duration_ms=template.duration_ms,
        size_bytes=template.size_bytes,
    )


def template_from_pb(message: pb.TemplateInfo) -> TemplateInfo:
    return TemplateInfo(
        image=message.image,
        cached=message.cached,
        duration_ms=message.duration_ms,
        size_bytes=message.size_bytes,
    )


def snapshot_to_pb(snapshot: SnapshotInfo) -> pb.SnapshotInfo:
    return pb.SnapshotInfo(
        name=snapshot.name,
        source_id=snapshot.source_id,
        size_bytes=snapshot.size_bytes,
        created_at_ms=snapshot.created_at_ms,
        method=snapshot.method,
        duration_ms=snapshot.duration_ms,
        options=options_to_pb(snapshot.options),
    )


def snapshot_from_pb(message: pb.SnapshotInfo) -> SnapshotInfo:
    return SnapshotInfo(
        name=message.name,
        source_id=message.source_id,
        size_bytes=message.size_bytes,
        created_at_ms=message.created_at_ms,
        method=message.method,
        duration_ms=message.duration_ms,
        options=options_from_pb(message.options, request=False),
    )


def file_info_to_pb(info: FileInfo) -> pb.FileInfo:
    return pb.FileInfo(
        path=info.path,
        name=info.name,
        type=_TYPE_TO_PB[info.type],
        size=info.size,
        mode=info.mode,
        mtime_ns=info.mtime_ns,
        symlink_target=info.symlink_target,
    )


def file_info_from_pb(message: pb.FileInfo) -> FileInfo:
    return FileInfo(
        path=message.path,
        name=message.name,
        type=_TYPE_FROM_PB.get(message.type) or FileType.OTHER,
        size=message.size,
        mode=message.mode,
        mtime_ns=message.mtime_ns,
        symlink_target=message.symlink_target,
    )


def exists_to_pb(result: ExistsResult) -> pb.ExistsResponse:
    return pb.ExistsResponse(exists=result.exists, type=_TYPE_TO_PB[result.type])


def exists_from_pb(message: pb.ExistsResponse) -> ExistsResult:
    return ExistsResult(exists=message.exists, type=_TYPE_FROM_PB.get(message.type))


def exec_request_to_pb(instance_id: str, request: ExecRequest) -> pb.ExecRequest:
    message = pb.ExecRequest(
        instance_id=instance_id,
        cwd=request.cwd,
        env=dict(request.env),
        stdin=request.stdin,
        timeout_ms=request.timeout_ms,
    )
    if request.argv is not None:
        message.argv.args.extend(request.argv)
    if request.shell is not None:
        message.shell = request.shell
    return message


def exec_request_from_pb(message: pb.ExecRequest) -> ExecRequest:
    command = message.WhichOneof("command")
    return ExecRequest(
        argv=tuple(message.argv.args) if command == "argv" else None,
        shell=message.shell if command == "shell" else None,
        cwd=message.cwd,
        env=dict(message.env),
        stdin=message.stdin,
        timeout_ms=message.timeout_ms,
    )


def exec_result_to_pb(result: ExecResult) -> pb.ExecResponse:
    return pb.ExecResponse(
        stdout=result.stdout,
        stderr=result.stderr,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_ms=result.duration_ms,
        stdout_truncated=result.stdout_truncated,
        stderr_truncated=result.stderr_truncated,
    )


def exec_result_from_pb(message: pb.ExecResponse) -> ExecResult:
    return ExecResult(
        stdout=message.stdout,
        stderr=message.stderr,
        exit_code=message.exit_code,
        timed_out=message.timed_out,
        duration_ms=message.duration_ms,
        stdout_truncated=message.stdout_truncated,
        stderr_truncated=message.stderr_truncated,
    )


def exec_event_to_pb(event: ExecEvent) -> pb.ExecStreamResponse:
    if isinstance(event, ExecExit):
        return pb.ExecStreamResponse(
            exit=pb.ExecExit(
                exit_code=event.exit_code, timed_out=event.timed_out, duration_ms=event.duration_ms
            )
        )
    if event.stream == "stdout":
        return pb.ExecStreamResponse(stdout=event.data)
    return pb.ExecStreamResponse(stderr=event.data)


def exec_event_from_pb(message: pb.ExecStreamResponse) -> ExecEvent:
    kind = message.WhichOneof("event")
    if kind == "exit":
        return ExecExit(
            exit_code=message.exit.exit_code,
            timed_out=message.exit.timed_out,
            duration_ms=message.exit.duration_ms,
        )
    return ExecOutput(stream=kind or "stdout", data=getattr(message, kind or "stdout"))


def status_to_pb(status: ServerStatus) -> pb.GetStatusResponse:
    pool = status.pool
    return pb.GetStatusResponse(
        version=status.version,
        backend=status.backend,
        namespace=status.namespace,
        pool=pb.PoolStatus(
            size=pool.size, ready=pool.ready, served=pool.served, started=pool.started
        ),
        runtimes=[
            pb.RuntimeInfo(
                name=r.name, version=r.version, platform=r.platform, available=r.available
            )
            for r in status.runtimes
        ],
        disk=pb.DiskLimit(
            enforced=status.disk.enforced, bytes=status.disk.bytes, reason=status.disk.reason
        ),
        tenants=[
            pb.TenantUsage(
                tenant=t.tenant,
                quotas=[pb.QuotaUse(name=q.name, used=q.used, limit=q.limit) for q in t.quotas],
            )
            for t in status.tenants
        ],
    )


def status_from_pb(message: pb.GetStatusResponse) -> ServerStatus:
    pool = message.pool
    return ServerStatus(
        version=message.version,
        backend=message.backend,
        namespace=message.namespace,
        pool=PoolStatus(size=pool.size, ready=pool.ready, served=pool.served, started=pool.started),
        runtimes=tuple(
            RuntimeInfo(name=r.name, version=r.version, platform=r.platform, available=r.available)
            for r in message.runtimes
        ),
        disk=DiskLimit(
            enforced=message.disk.enforced, bytes=message.disk.bytes, reason=message.disk.reason
        ),
        tenants=tuple(
            TenantUsage(t.tenant, tuple(QuotaUse(q.name, q.used, q.limit) for q in t.quotas))
            for t in message.tenants
        ),
    )


# ---------------------------------------------------------------- tools

#: Proto field name -> the tool's own parameter name, where they differ.
R = TypeVar("R")

_TOOL_PARAM = {
    "case_insensitive": "-i",
    "line_numbers": "-n",
    "after_context": "-A",
    "before_context": "-B",
    "context": "-C",
}
#: String parameters whose empty value means something (an empty file, a
#: deletion) or must reach the tool so it can name what is missing.
_ALWAYS_SENT = {"file_path", "content", "old_string", "new_string", "command", "pattern"}


def tool_param_name(field_name: str) -> str:
    """The tool's own name of a typed request's field."""
    return _TOOL_PARAM.get(field_name, field_name)


def tool_args_from_pb(message: Any) -> dict[str, Any]:
    """Canonical tool arguments from a typed request: only what was set."""
    args: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        if field.name in ("instance_id", "tool_call_id"):
            continue
        value = getattr(message, field.name)
        if field.has_presence:
            if not message.HasField(field.name):
                continue
        elif field.name not in _ALWAYS_SENT and not value:
            continue
        args[tool_param_name(field.name)] = value
    return args


def tool_response_to_pb(response_type: type[R], result: SandboxToolResult) -> R:
    """A typed tool response.

    Every field a tool documents has its place in the message (a drift test,
    tests/unit/test_tool_contract.py, holds the tools' docstrings and the
    proto together); anything else stays in CallTool's fields_json.
    """
    message = response_type(text=result.text, is_error=result.is_error)  # type: ignore[call-arg]
    for field in response_type.DESCRIPTOR.fields:  # type: ignore[attr-defined]
        value = result.fields.get(field.name)
        if field.name in ("text", "is_error") or value is None:
            continue
        try:
            if field.is_repeated:
                getattr(message, field.name).extend(value)
            else:
                setattr(message, field.name, value)
        except (TypeError, ValueError):
            # Fields come from inside a sandbox: a malformed one is dropped,
            # never allowed to fail the call, but not without a trace.
            log.warning(
                "%s: dropped field %s with a value of type %s",
                response_type.__name__,
                field.name,
                type(value).__name__,
            )
            continue
    return message


def tool_descriptions_to_pb(tools: list[ToolDescription]) -> pb.ListToolsResponse:
    return pb.ListToolsResponse(
        tools=[
            pb.ToolDescription(
                name=tool.name,
                description=tool.description,
                input_schema_json=json.dumps(tool.input_schema),
            )
            for tool in tools
        ]
    )


def tool_descriptions_from_pb(message: pb.ListToolsResponse) -> list[ToolDescription]:
    tools = []
    for tool in message.tools:
        schema = json.loads(tool.input_schema_json or "{}")
        tools.append(
            ToolDescription(
                name=tool.name,
                description=tool.description,
                input_schema=schema if isinstance(schema, dict) else {},
            )
        )
    return tools


# ---------------------------------------------------------------- processes


def process_request_to_pb(instance_id: str, request: ProcessRequest) -> pb.StartProcessRequest:
    message = pb.StartProcessRequest(instance_id=instance_id, cwd=request.cwd, env=request.env)
    if request.argv is not None:
        message.argv.args.extend(request.argv)
    if request.shell is not None:
        message.shell = request.shell
    if request.pty is not None:
        message.pty.rows, message.pty.cols = request.pty
    return message


def process_request_from_pb(message: pb.StartProcessRequest) -> ProcessRequest:
    command = message.WhichOneof("command")
    return ProcessRequest(
        argv=tuple(message.argv.args) if command == "argv" else None,
        shell=message.shell if command == "shell" else None,
        cwd=message.cwd,
        env=dict(message.env),
        pty=(message.pty.rows, message.pty.cols) if message.HasField("pty") else None,
    )


def process_info_to_pb(info: ProcessInfo) -> pb.ProcessInfo:
    return pb.ProcessInfo(
        handle=info.handle,
        pid=info.pid,
        command=info.command,
        state=info.state,
        exit_code=info.exit_code,
        signal=info.signal,
        pty=info.pty,
        started=info.started,
        output_bytes=info.output_bytes,
        log_path=info.log_path,
    )


def process_info_from_pb(message: pb.ProcessInfo) -> ProcessInfo:
    return ProcessInfo(
        handle=message.handle,
        pid=message.pid,
        command=tuple(message.command),
        state=message.state,
        exit_code=message.exit_code if message.HasField("exit_code") else None,
        signal=message.signal if message.HasField("signal") else None,
        pty=message.pty,
        started=message.started,
        output_bytes=message.output_bytes,
        log_path=message.log_path,
    )


def process_event_to_pb(event: ProcessEvent) -> pb.ProcessOutput:
    if isinstance(event, ProcessExit):
        return pb.ProcessOutput(
            exit=pb.ProcessExit(
                info=process_info_to_pb(event.info), missed=event.missed, offset=event.offset
            )
        )
    return pb.ProcessOutput(
        chunk=pb.ProcessChunk(stream=event.stream, data=event.data, offset=event.offset)
    )


def process_event_from_pb(message: pb.ProcessOutput) -> ProcessEvent:
    if message.WhichOneof("event") == "exit":
        return ProcessExit(
            info=process_info_from_pb(message.exit.info),
            missed=message.exit.missed,
            offset=message.exit.offset,
        )
    chunk = message.chunk
    return ProcessChunk(stream=chunk.stream or "stdout", data=chunk.data, offset=chunk.offset)


def tree_upload_to_pb(result: TreeUploadResult) -> pb.UploadTreeResponse:
    return pb.UploadTreeResponse(
        files=result.files,
        directories=result.directories,
        symlinks=result.symlinks,
        bytes=result.bytes,
        skipped_links=[
            pb.SkippedLink(path=link.path, target=link.target, reason=link.reason)
            for link in result.skipped_links
        ],
        links_skipped=result.links_skipped,
    )


def tree_upload_from_pb(message: pb.UploadTreeResponse) -> TreeUploadResult:
    return TreeUploadResult(
        files=message.files,
        directories=message.directories,
        symlinks=message.symlinks,
        bytes=message.bytes,
        skipped_links=tuple(
            SkippedLink(path=link.path, target=link.target, reason=link.reason)
            for link in message.skipped_links
        ),
        links_skipped=message.links_skipped,
    )


def listening_ports_to_pb(ports: list[ListeningPort]) -> pb.ListPortsResponse:
    return pb.ListPortsResponse(ports=[pb.ListeningPort(host=p.host, port=p.port) for p in ports])


def listening_ports_from_pb(message: pb.ListPortsResponse) -> list[ListeningPort]:
    return [ListeningPort(host=p.host, port=p.port) for p in message.ports]


def preview_to_pb(preview: Preview) -> pb.CreatePreviewResponse:
    return pb.CreatePreviewResponse(
        token=preview.token, expires_at=preview.expires_at, path=preview.path, host=preview.host
    )


def preview_from_pb(message: pb.CreatePreviewResponse) -> Preview:
    return Preview(
        token=message.token, expires_at=message.expires_at, path=message.path, host=message.host
    )

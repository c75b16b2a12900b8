"""The executor's operations table: op name -> handler, argument checks.

Handlers take Python values (bytes as bytes); the channel codec in ``main``
turns ``*_base64`` fields into bytes and back, so the in-process local backend
pays no encoding cost.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sandboxd.contract.errors import InvalidArgument
from sandboxd.executor import (
    files,
    identity,
    isolation,
    owners,
    pipes,
    process,
    processes,
    transfer,
    tree,
    trust,
)
from sandboxd.executor.records import RECORDED_TOOLS, CallRecords
from sandboxd.executor.tools import ToolSession
from sandboxd.executor.tools.locks import PathLocks
from sandboxd.executor.wire import PROTOCOL_VERSION

Emit = Callable[[dict[str, Any]], None]
Handler = Callable[["Executor", Mapping[str, Any], threading.Event, Emit | None], Any]
#: A daemon's channel (executor.direct.Outlet; None in-process): what a call
#: that sets up something per daemon is told it came on.
Channel = object
ChannelHandler = Callable[
    ["Executor", Mapping[str, Any], threading.Event, Emit | None, Channel], Any
]

DEFAULT_MAX_PAYLOAD = 16 << 20
DEFAULT_MAX_OUTPUT = 16 << 20
DEFAULT_EXEC_TIMEOUT_MS = 120_000


def _str(args: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key, default)
    if not isinstance(value, str):
        raise InvalidArgument(f"{key} must be a string")
    return value


def _int(args: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{key} must be an integer")
    if value < 0:
        raise InvalidArgument(f"{key} must not be negative (got {value})")
    return value


def _bool(args: Mapping[str, Any], key: str) -> bool:
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument(f"{key} must be a boolean")
    return value


def _bytes(args: Mapping[str, Any], key: str) -> bytes:
    value = args.get(key, b"")
    if not isinstance(value, bytes):
        raise InvalidArgument(f"{key} must be bytes")
    return value


def _str_map(args: Mapping[str, Any], key: str) -> dict[str, str]:
    value = args.get(key) or {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidArgument(f"{key} must map strings to strings")
    return dict(value)


class Executor:
    """Carries out operations for one workspace, rooted at its working directory."""

    def __init__(
        self,
        workdir: str,
        *,
        state_dir: str,
        base_env: Mapping[str, str] | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT,
        bundle_id: str = "",
        read_guard: bool = True,
    ) -> None:
        self.workdir = workdir
        self.state_dir = state_dir
        #: The environment the executor started with (the container's: never
        #: the sandbox's options, see executor.environment) ...
        self.start_env = dict(os.environ if base_env is None else base_env)
        #: ... and the workload's: that plus the sandbox's env, from hello.
        self.base_env = dict(self.start_env)
        #: Its parts from hello: the daemon's CA files (executor.trust), the sandbox's env.
        self.trust_env: dict[str, str] = {}
        self.options_env: dict[str, str] = {}
        self.max_payload_bytes = max_payload_bytes
        self.max_output_bytes = max_output_bytes
        self.bundle_id = bundle_id
        self.read_guard = read_guard
        self.locks = PathLocks()
        self._tools: ToolSession | None = None
        self.records = CallRecords()
        self._tools_guard = threading.Lock()
        self.transfers = transfer.Sessions()
        self.processes = processes.Processes(state_dir)
        self.pipes = pipes.Pipes()
        #: Which daemon's channel owns the sandbox's one-owner things (owners.py).
        self.owners = owners.Owners()
        #: The direct channel's socket path (executor.direct), named in hello.
        self.direct_path: str | None = None
        #: "shipped" when the bootstrap loaded the daemon's bytecode (main.BYTECODE).
        self.bytecode = "compiled"

    def handle(
        self,
        op: str,
        args: Mapping[str, Any],
        cancel: threading.Event | None = None,
        emit: Emit | None = None,
        channel: Channel = None,
    ) -> Any:
        """Carry out ``op``; ``channel``: the daemon channel it came on."""
        per_channel = _CHANNEL_HANDLERS.get(op)
        if per_channel is not None:
            return per_channel(self, args, cancel or threading.Event(), emit, channel)
        handler = _HANDLERS.get(op)
        if handler is None:
            raise InvalidArgument(f"unknown operation {op!r}")
        return handler(self, args, cancel or threading.Event(), emit)

    def channel_closed(self, channel: Channel) -> None:
        """A daemon's channel is gone: its transfers have nobody left to finish
        them, and what it owned passes to the next newest hello's channel."""
        self.transfers.abort_owned(channel)
        successor = self.owners.closed(channel)
        if successor is not None:
            with contextlib.suppress(InvalidArgument, OSError, ValueError):
                _apply_hello(self, successor)

    def path(self, args: Mapping[str, Any], key: str = "path") -> str:
        return files.resolve(self.workdir, args.get(key))

    @property
    def tools(self) -> ToolSession:
        # Created on first use: hello may still move the workdir before that.
        with self._tools_guard:
            if self._tools is None:
                self._tools = ToolSession(
                    self.workdir,
                    state_dir=self.state_dir,
                    read_guard=self.read_guard,
                    path_locks=self.locks,
                    env=self.base_env,
                )
            return self._tools

    def close(self) -> None:
        """Stop background jobs and release per-workspace resources."""
        self.transfers.abort_all()
        self.pipes.close()
        self.processes.close()
        with self._tools_guard:
            if self._tools is not None:
                self._tools.close()
                self._tools = None


def _hello(
    ex: Executor,
    args: Mapping[str, Any],
    cancel: threading.Event,
    emit: Emit | None,
    channel: Channel,
) -> Any:
    _apply_hello(ex, args)
    # The newest hello owns the sandbox (owners.py): its settings, just put
    # in force, are the ones a successor's close would bring back.
    ex.owners.hello(channel, args)
    # A daemon (re)starting on this channel has no transfers: ones begun on
    # it before have nobody left to finish them, so their temp files go now.
    # Other channels' transfers are other daemons' and go on.
    ex.transfers.abort_owned(channel)
    # The workdir may be a folder inside the volume that does not exist yet.
    with contextlib.suppress(OSError):
        os.makedirs(ex.workdir, exist_ok=True)
    reply: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "pid": os.getpid(),
        "bundle": ex.bundle_id,
        "bytecode": ex.bytecode,
    }
    if ex.direct_path is not None:
        reply["direct"] = ex.direct_path
    if identity.active() is not None:
        reply["isolation"] = isolation.mode()
    return reply


def _apply_hello(ex: Executor, args: Mapping[str, Any]) -> None:
    """Put a hello's settings in force (every replica states the same ones
    for a sandbox, but for its own egress CA)."""
    # A (re)connecting daemon restates its limits; the executor keeps its state.
    if "workdir" in args:
        ex.workdir = _str(args, "workdir")
    if "max_payload_bytes" in args:
        ex.max_payload_bytes = _int(args, "max_payload_bytes")
    if "max_output_bytes" in args:
        ex.max_output_bytes = _int(args, "max_output_bytes")
    if "read_guard" in args:
        ex.read_guard = _bool(args, "read_guard")
    if "env" in args:
        # The sandbox's environment (SandboxOptions.env) is the workload's only.
        ex.options_env = _str_map(args, "env")
    if "trust" in args:
        # The daemon's egress CA: files in the executor's state, root's (trust.py).
        with identity.as_executor():
            ex.trust_env = trust.install(ex.state_dir, _str(args, "trust"))
    ex.base_env = {**ex.start_env, **ex.trust_env, **ex.options_env}
    if "allow_ptrace" in args:
        isolation.enabled = not _bool(args, "allow_ptrace")


def _read_file(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    length = args.get("length")
    return files.read_file(
        ex.path(args),
        _int(args, "offset", 0),
        None if length is None else _int(args, "length"),
        ex.max_payload_bytes,
    )


def _write_file(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    expected = args.get("expected_sha256")
    mode = args.get("mode")
    return files.write_file(
        ex.path(args),
        _bytes(args, "data"),
        create_parents=_bool(args, "create_parents"),
        expected_sha256=None if expected is None else _str(args, "expected_sha256"),
        mode=None if mode is None else _int(args, "mode"),
        locks=ex.locks,
    )


def _stat(ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None) -> Any:
    return files.stat(ex.path(args), follow_symlinks=_bool(args, "follow_symlinks"))


def _list_dir(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return {"entries": files.list_dir(ex.path(args))}


def _exists(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return files.exists(ex.path(args))


def _make_dir(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return files.make_dir(
        ex.path(args), parents=_bool(args, "parents"), exist_ok=_bool(args, "exist_ok")
    )


def _remove(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    removed = files.remove(
        ex.path(args),
        recursive=_bool(args, "recursive"),
        missing_ok=_bool(args, "missing_ok"),
        protected=(os.path.normpath(ex.workdir),),
    )
    return {"removed": removed}


def _command(args: Mapping[str, Any]) -> tuple[list[str] | None, str | None]:
    """(argv, shell) of an exec-like request: exactly one given, checked."""
    argv = args.get("argv")
    shell = args.get("shell")
    if (argv is None) == (shell is None):
        raise InvalidArgument("give exactly one of argv and shell")
    if argv is not None and (
        not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv)
    ):
        raise InvalidArgument("argv must be a non-empty list of strings")
    if shell is not None:
        shell = _str(args, "shell")
    for item in [*(argv or []), shell or ""]:
        if "\x00" in item:
            raise InvalidArgument("command contains a NUL byte")
    return argv, shell


def _exec(ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None) -> Any:
    argv, shell = _command(args)
    cwd = ex.path(args, "cwd") if args.get("cwd") else ex.workdir
    env = {**ex.base_env, **_str_map(args, "env")}
    timeout_ms = _int(args, "timeout_ms", 0) or DEFAULT_EXEC_TIMEOUT_MS
    stream = None
    if emit is not None:
        send = emit

        def stream(name: str, chunk: bytes) -> None:
            send({name: chunk})

    return process.run(
        argv=argv,
        shell=shell,
        cwd=cwd,
        env=env,
        stdin=_bytes(args, "stdin"),
        timeout_s=timeout_ms / 1000,
        max_output=ex.max_output_bytes,
        cancel=cancel,
        emit=stream,
    )


def _tool(ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None) -> Any:
    name = _str(args, "name")
    tool_args = args.get("args") or {}
    if not isinstance(tool_args, Mapping):
        raise InvalidArgument("tool arguments must be an object")
    cwd = args.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise InvalidArgument("cwd must be a string")
    call_id = args.get("tool_call_id")
    if call_id and name in RECORDED_TOOLS:
        return ex.records.run(
            _str(args, "tool_call_id"),
            name,
            # The folder is part of what the call means: a replay under the
            # same id from another folder is a different call.
            {"args": tool_args, "cwd": cwd} if cwd else tool_args,
            lambda: ex.tools.run(name, tool_args, cancel=cancel, cwd=cwd),
        )
    return ex.tools.run(name, tool_args, cancel=cancel, cwd=cwd)


# ------------------------------------------------------------ transfers


def _session_id(args: Mapping[str, Any]) -> str:
    session = _str(args, "session")
    if not 1 <= len(session) <= 64:
        raise InvalidArgument("session must be 1-64 characters")
    return session


def _upload_begin(
    ex: Executor,
    args: Mapping[str, Any],
    cancel: threading.Event,
    emit: Emit | None,
    channel: Channel,
) -> Any:
    session_id = _session_id(args)
    expected = args.get("expected_sha256")
    mode = args.get("mode")
    session = transfer.Upload(
        ex.path(args),
        create_parents=_bool(args, "create_parents"),
        expected_sha256=None if expected is None else _str(args, "expected_sha256"),
        mode=None if mode is None else _int(args, "mode"),
        locks=ex.locks,
    )
    return {"session": ex.transfers.add(session_id, session, channel)}


def _upload_chunk(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    session: transfer.Upload = ex.transfers.get(_session_id(args), transfer.Upload)
    session.write(_int(args, "offset"), _bytes(args, "data"))
    return {}


def _upload_commit(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    session: transfer.Upload = ex.transfers.get(_session_id(args), transfer.Upload)
    try:
        return session.commit(_int(args, "size"))
    finally:
        ex.transfers.pop(_session_id(args))


def _transfer_abort(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return {"aborted": ex.transfers.abort(_session_id(args))}


def _download_begin(
    ex: Executor,
    args: Mapping[str, Any],
    cancel: threading.Event,
    emit: Emit | None,
    channel: Channel,
) -> Any:
    session_id = _session_id(args)
    session = transfer.Download(ex.path(args))
    return {"session": ex.transfers.add(session_id, session, channel), "size": session.size}


def _download_read(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    session: transfer.Download = ex.transfers.get(_session_id(args), transfer.Download)
    return {"data": session.read(_int(args, "offset"), _int(args, "length"))}


def _tree_upload_begin(
    ex: Executor,
    args: Mapping[str, Any],
    cancel: threading.Event,
    emit: Emit | None,
    channel: Channel,
) -> Any:
    session_id = _session_id(args)
    session = tree.TreeUpload(ex.path(args))
    return {"session": ex.transfers.add(session_id, session, channel)}


def _tree_upload_chunk(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    session: tree.TreeUpload = ex.transfers.get(_session_id(args), tree.TreeUpload)
    session.ordered(_int(args, "seq"), cancel)
    try:
        session.write(_bytes(args, "data"))
    finally:
        session.advance()
    return {}


def _tree_upload_commit(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    session: tree.TreeUpload = ex.transfers.get(_session_id(args), tree.TreeUpload)
    session.ordered(_int(args, "seq"), cancel)
    try:
        return session.commit(cancel)
    finally:
        ex.transfers.pop(_session_id(args))


def _tree_download_begin(
    ex: Executor,
    args: Mapping[str, Any],
    cancel: threading.Event,
    emit: Emit | None,
    channel: Channel,
) -> Any:
    session_id = _session_id(args)
    gitignore_aware = _bool(args, "gitignore")
    session = tree.TreeDownload(ex.path(args), gitignore_aware=gitignore_aware)
    return {"session": ex.transfers.add(session_id, session, channel)}


def _tree_download_read(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    session: tree.TreeDownload = ex.transfers.get(_session_id(args), tree.TreeDownload)
    session.ordered(_int(args, "seq"), cancel)
    try:
        data, eof = session.read(cancel)
    finally:
        session.advance()
    if eof:
        ex.transfers.pop(_session_id(args))
        session.abort()
        return {"data": b"", "eof": True, **session.counts}
    return {"data": data, "eof": False}


# ------------------------------------------------------------ long-lived processes


def _proc_start(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    argv, shell = _command(args)
    pty = args.get("pty")
    if pty is not None and not isinstance(pty, Mapping):
        raise InvalidArgument("pty must be an object with rows and cols")
    env = {**ex.base_env, **_str_map(args, "env")}
    if pty is not None:
        env.setdefault("TERM", "xterm-256color")
    return ex.processes.start(
        command=argv if argv is not None else ["bash", "-c", shell or ""],
        cwd=ex.path(args, "cwd") if args.get("cwd") else ex.workdir,
        env=env,
        pty=None if pty is None else (_int(pty, "rows"), _int(pty, "cols")),
    )


def _proc_attach(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    if emit is None:
        raise InvalidArgument("proc_attach is a streamed operation")
    offset = args.get("offset")
    return ex.processes.attach(
        args.get("handle"), None if offset is None else _int(args, "offset"), cancel, emit
    )


def _proc_write(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    process = ex.processes.get(args.get("handle"))
    written = process.write(_bytes(args, "data"), _bool(args, "eof"))
    return {"written": written}


def _proc_resize(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    process = ex.processes.get(args.get("handle"))
    rows = _int(args, "rows")
    cols = _int(args, "cols")
    for name, value in (("rows", rows), ("cols", cols)):
        if not 0 < value <= processes.MAX_TERMINAL_SIZE:
            raise InvalidArgument(
                f"{name} must be from 1 to {processes.MAX_TERMINAL_SIZE} (got {value})"
            )
    process.resize(rows, cols)
    return process.info()


def _proc_signal(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    number = processes.check_signal(args.get("signal"))
    process = ex.processes.get(args.get("handle"))
    process.send_signal(number)
    return process.info()


def _proc_list(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return {"processes": ex.processes.list()}


# ------------------------------------------------------------ socket pipes


def _streamed(op: str, emit: Emit | None) -> Emit:
    if emit is None:
        raise InvalidArgument(f"{op} is a streamed operation")
    return emit


def _pipe_connect(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return ex.pipes.connect(
        pipes.pipe_id(args.get("pipe")),
        pipes.loopback(args.get("host", "127.0.0.1")),
        pipes.port_number(args.get("port")),
        cancel,
        _streamed("pipe_connect", emit),
        _bytes(args, "data"),
    )


def _pipe_listen(
    ex: Executor,
    args: Mapping[str, Any],
    cancel: threading.Event,
    emit: Emit | None,
    channel: Channel,
) -> Any:
    listeners = pipes.listeners_arg(args.get("listeners"))
    # Only the gateway listens, on fixed ports: the owner's listen serves
    # them, another channel's stands by (owners.py, pipes.Pipes.listen).
    return ex.pipes.listen(
        listeners,
        cancel,
        _streamed("pipe_listen", emit),
        owns=lambda: ex.owners.owns(channel),
        channel=channel,
    )


def _pipe_attach(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return ex.pipes.attach(
        pipes.pipe_id(args.get("pipe")),
        pipes.pipe_id(args.get("conn"), "conn"),
        cancel,
        _streamed("pipe_attach", emit),
    )


def _pipe_write(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return ex.pipes.write(pipes.pipe_id(args.get("pipe")), _bytes(args, "data"), cancel)


def _pipe_shutdown(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return ex.pipes.shutdown(pipes.pipe_id(args.get("pipe")))


def _ports_list(
    ex: Executor, args: Mapping[str, Any], cancel: threading.Event, emit: Emit | None
) -> Any:
    return {"ports": pipes.listening_ports()}


#: Operations that set up something of the daemon channel they came on.
_CHANNEL_HANDLERS: dict[str, ChannelHandler] = {
    "hello": _hello,
    "upload_begin": _upload_begin,
    "download_begin": _download_begin,
    "tree_upload_begin": _tree_upload_begin,
    "tree_download_begin": _tree_download_begin,
    "pipe_listen": _pipe_listen,
}

_HANDLERS: dict[str, Handler] = {
    "read_file": _read_file,
    "write_file": _write_file,
    "stat": _stat,
    "list_dir": _list_dir,
    "exists": _exists,
    "make_dir": _make_dir,
    "remove": _remove,
    "exec": _exec,
    "tool": _tool,
    "upload_chunk": _upload_chunk,
    "upload_commit": _upload_commit,
    "transfer_abort": _transfer_abort,
    "download_read": _download_read,
    "tree_upload_chunk": _tree_upload_chunk,
    "tree_upload_commit": _tree_upload_commit,
    "tree_download_read": _tree_download_read,
    "proc_start": _proc_start,
    "proc_attach": _proc_attach,
    "proc_write": _proc_write,
    "proc_resize": _proc_resize,
    "proc_signal": _proc_signal,
    "proc_list": _proc_list,
    "pipe_connect": _pipe_connect,
    "pipe_attach": _pipe_attach,
    "pipe_write": _pipe_write,
    "pipe_shutdown": _pipe_shutdown,
    "ports_list": _ports_list,
}

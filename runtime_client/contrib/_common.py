"""What the framework adapters share: their name, one channel per event loop,
and how sandboxd's answers become what the frameworks expect.

Nothing here imports a framework; every adapter package builds on it.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import re
import secrets
import time
import weakref

from runtime_client.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    SandboxdError,
    SandboxUnavailable,
)
from runtime_client.grpc_transport import GrpcTransport
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import FileType

#: The name every framework sees sandboxd under (inspect's sandbox type,
#: pydantic-ai's ``WorkspaceRef.provider``). Not a bare "sandboxd": Docker
#: Sandboxes' ``sbx`` daemon, kubernetes-sigs agent-sandbox's runtime daemon and
#: macOS's sandbox daemon are all called that; none of them is this one.
NAME = "sandboxd-workspace"

#: Why a request to run as another user (root included) is refused: sandboxd
#: has no way to do it, on purpose (SECURITY.md).
USER_SWITCH_REFUSED = (
    "sandboxd runs every command as the workspace's one unprivileged user, in a "
    "container with no capabilities and no-new-privileges, so it cannot run one as "
    "{user!r}: switching users (root included) is refused by design"
)
#: Why a request to mount a host path is refused.
HOST_MOUNT_REFUSED = (
    "sandboxd never mounts host paths into a workspace, by design; copy files in "
    "(write_file, upload, upload_tree) instead"
)


#: Random bits in the instance id of every sandbox an adapter makes (after its
#: prefix): a ref or an id is as hard to guess as a token.
_ID_RANDOM_HEX = 32


def new_instance_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(_ID_RANDOM_HEX // 2)}"


def instance_id_pattern(prefix: str) -> re.Pattern[str]:
    """The ids ``new_instance_id(prefix)`` makes."""
    return re.compile(re.escape(prefix) + rf"-[0-9a-f]{{{_ID_RANDOM_HEX}}}")


_transports: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str | None], GrpcTransport]
] = weakref.WeakKeyDictionary()


def transport_for(target: str, token: str | None = None) -> GrpcTransport:
    """One gRPC channel per target and event loop, shared by every sandbox on it.

    Frameworks build a backend per run and never close it; a grpc.aio channel
    belongs to the loop it was made on. So channels are kept per loop (and go
    with it) instead of per backend, which would leave one open per run.
    """
    loop = asyncio.get_running_loop()
    per_loop = _transports.setdefault(loop, {})
    transport = per_loop.get((target, token))
    if transport is None:
        transport = per_loop[(target, token)] = GrpcTransport(target, token=token)
    return transport


def shell_exit_code(code: int) -> int:
    """sandboxd reports a death by signal N as -N; shells and the frameworks say 128+N."""
    return 128 - code if code < 0 else code


def decode(data: bytes) -> str:
    """Command output as text: undecodable bytes become U+FFFD, never dropped."""
    return data.decode("utf-8", errors="replace")


#: How long a sandbox that stopped under a running call may take to be gone.
SETTLE_SECONDS = 5.0


async def sandbox_gone(sandbox: Sandbox, *, settle: float = 0.0) -> bool:
    """Whether the sandbox itself no longer exists: asked after a NotFound (of a
    file, a program or the sandbox?), or, with ``settle``, after a call lost
    its sandbox's channel.

    A sandbox being deleted still reads "running", then "stopped", until its
    container is gone; so with ``settle`` the answer waits (at most ``settle``
    seconds) until the sandbox is gone or answers a call again.
    """
    deadline = time.monotonic() + settle
    while True:
        try:
            info = await sandbox.info()
            if not settle:
                return False
            if info.state == "running":
                await sandbox.exists("/")  # answers only while its executor does
                return False
        except NotFound:
            return True
        except SandboxUnavailable:
            pass
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)


class FileOp(enum.Enum):
    READ = "read"
    WRITE = "write"
    LIST = "list"
    MAKE_DIR = "make_dir"
    STAT = "stat"
    REMOVE = "remove"


class SandboxGoneError(Exception):
    """A file operation failed because the sandbox itself is gone."""


async def _kind(sandbox: Sandbox, path: str) -> str:
    """What is at ``path`` (following symlinks): a FileType value, "missing",
    or "unreachable" (a parent is a file, or a symlink loop)."""
    try:
        found = await sandbox.stat(path, follow_symlinks=True)
    except NotFound:
        return "missing"
    except InvalidArgument:
        return "unreachable"
    return str(found.type)


async def os_error(exc: SandboxdError, sandbox: Sandbox, op: FileOp, path: str) -> Exception:
    """The builtin error a framework expects for a failed file operation.

    sandboxd's error tree is coarser than errno (InvalidArgument covers "is a
    directory", "not a directory" and "not a regular file"), so the ambiguous
    cases look at the path once more; that costs a call only on the error path.
    Raises ``SandboxGoneError`` when the sandbox itself is gone; an error that
    is not about the path (a transient SandboxUnavailable, a refused token)
    comes back as it was, for the caller to raise.
    """
    message = str(exc)
    if isinstance(exc, NotFound):
        if await sandbox_gone(sandbox):
            raise SandboxGoneError(message) from exc
        return FileNotFoundError(errno.ENOENT, message, path)
    if isinstance(exc, PermissionDenied):
        return PermissionError(errno.EACCES, message, path)
    if not isinstance(exc, InvalidArgument | AlreadyExists):
        return exc
    kind = await _kind(sandbox, path)
    if kind == "unreachable":
        return NotADirectoryError(errno.ENOTDIR, message, path)
    if op is FileOp.MAKE_DIR and kind != "missing":
        return FileExistsError(errno.EEXIST, message, path)
    if op is FileOp.LIST and kind != FileType.DIRECTORY:
        return NotADirectoryError(errno.ENOTDIR, message, path)
    if op in (FileOp.READ, FileOp.WRITE) and kind == FileType.DIRECTORY:
        return IsADirectoryError(errno.EISDIR, f"{message} (a directory)", path)
    if isinstance(exc, AlreadyExists):
        # Creating parents met a file where a directory had to be.
        return NotADirectoryError(errno.ENOTDIR, message, path)
    return OSError(errno.EINVAL, message, path)

"""The daemon's end of the direct channel (executor.direct): no Docker proxy.

The executor listens on a unix socket in a root-only directory of its own
tmpfs and names its path in ``hello``. sandboxd, root on the host, reaches it
through ``/proc/<container pid>/root``: a path socket is found by its inode,
so this crosses into the container's mount namespace without entering it.

Everything about the path comes from inside the container and is untrusted:
a root process in there could replace the socket, or any folder on the way
to it, with a symlink (an absolute one resolves against the HOST root under
/proc/<pid>/root) or the socket with its own listener. So the path is opened
with openat2 beneath the container's root with no symlink followed anywhere
(the executor's own path has none; a kernel without openat2 stays on
attach), O_PATH so nothing is connected yet; it must be a socket; and,
before one byte is sent, the listener's credentials
(SO_PEERCRED: taken when it called listen) must be those of the executor:
uid 0, a child of the container's init (State.Pid: our bootstrap, which
forks the executor and nothing else), with the container-side pid the
executor gave in its hello over the attach stream. Anything else raises
DirectUnavailable and the workspace stays on the attach stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import re
import signal
import socket
import stat
import struct

#: Where the executor's state tmpfs is (executor.main.STATE_DIR); the socket
#: must be in a directory of its own right under it.
_PATH = re.compile(r"/run/sandboxd/[0-9a-f]{16}/s")
_UCRED = struct.Struct("3i")
#: SO_PEERPIDFD (Linux 6.5): the listener as a pidfd, so its pid cannot be
#: recycled between the check and its use.
_SO_PEERPIDFD = 77
#: Bytes asked of the socket per read.
READ_SIZE = 1 << 20
#: openat2(2): one number on every architecture (Linux 5.6).
_SYS_OPENAT2 = 437
#: struct open_how {u64 flags; u64 mode; u64 resolve}.
_OPEN_HOW = struct.Struct("=QQQ")
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_libc = ctypes.CDLL(None, use_errno=True)


class DirectUnavailable(Exception):
    """Why a workspace stays on the attach stream (logged, never raised to a caller)."""


class SocketSource:
    """An ExecutorChannel ByteSource over the direct socket (no demux header)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def read(self) -> bytes:
        try:
            return await self._reader.read(READ_SIZE)
        except (ConnectionError, OSError):
            return b""


def check_path(path: object) -> str:
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise DirectUnavailable(f"the executor named no usable socket path ({path!r:.80})")
    return path


def connect(
    container_pid: object, path: object, executor_pid: object, *, proc: str = "/proc"
) -> socket.socket:
    """A connected socket to the executor of the container whose init is ``container_pid``.

    Blocking (a unix connect is immediate); run it on a thread. ``proc``: the
    host's procfs (tests point it elsewhere).
    """
    if not isinstance(container_pid, int) or container_pid <= 0:
        raise DirectUnavailable("the container has no host pid (not running?)")
    if not isinstance(executor_pid, int) or executor_pid <= 0:
        raise DirectUnavailable("the executor's hello gave no pid")
    root = f"{proc}/{container_pid}/root"
    target = f"{root}{check_path(path)}"
    try:
        fd = open_beneath(root, check_path(path).lstrip("/"))
    except OSError as exc:
        # runsc (gVisor): /proc/<pid>/root is not the sandbox's filesystem;
        # a daemon without the host's pid namespace has no such /proc entry;
        # ELOOP: a symlink on the way.
        raise DirectUnavailable(f"cannot open {target}: {exc.strerror}") from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise DirectUnavailable(f"{target} is not a socket")
        # Connect through the opened inode: no second walk of the path.
        sock.settimeout(2.0)
        try:
            sock.connect(f"/proc/self/fd/{fd}")
        except OSError as exc:
            raise DirectUnavailable(f"cannot connect to {target}: {exc}") from None
        _check_peer(sock, container_pid, executor_pid)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise DirectUnavailable(f"the socket failed: {exc}") from None
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(fd)
    return sock


def open_beneath(root: str, relative: str) -> int:
    """An O_PATH descriptor of ``root``/``relative``, resolved beneath ``root``
    following no symlink at all (ELOOP if one is on the way)."""
    # ``root`` itself (/proc/<pid>/root, a magic link the kernel resolves to
    # the container's root) is ours; only what is below it is theirs.
    base = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        how = _OPEN_HOW.pack(
            os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC,
            0,
            _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
        )
        fd = _libc.syscall(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(base),
            ctypes.c_char_p(os.fsencode(relative)),
            ctypes.c_char_p(how),
            ctypes.c_size_t(len(how)),
        )
        if fd < 0:
            code = ctypes.get_errno()
            if code in (errno.ENOSYS, errno.EPERM):
                # An old kernel, or a seccomp profile (a sidecar's) without
                # openat2: no safe walk, so no direct channel.
                raise OSError(code, f"openat2 unavailable ({os.strerror(code)})")
            raise OSError(code, os.strerror(code))
        return int(fd)
    finally:
        os.close(base)


def _check_peer(sock: socket.socket, container_pid: int, executor_pid: int) -> None:
    pid, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    if uid != 0:
        raise DirectUnavailable(f"the socket's listener is uid {uid}, not the executor (root)")
    if pid <= 0:
        raise DirectUnavailable("the socket's listener is gone")
    pidfd = -1
    with contextlib.suppress(OSError):
        pidfd = struct.unpack(
            "i", sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD, struct.calcsize("i"))
        )[0]
    try:
        ppid, nspids = _status(pid)
        if ppid != container_pid:
            raise DirectUnavailable(
                f"the socket's listener (pid {pid}) is not a child of the container's "
                f"init (pid {container_pid})"
            )
        if not nspids or nspids[-1] != executor_pid:
            raise DirectUnavailable(
                f"the socket's listener is not the executor that said hello "
                f"(pid {nspids[-1:] or '?'} in the container, hello said {executor_pid})"
            )
        if pidfd >= 0:
            try:
                # Still alive after the reads above: the pid was not recycled.
                signal.pidfd_send_signal(pidfd, 0)
            except OSError:
                raise DirectUnavailable("the socket's listener exited during the check") from None
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def executor_gone(container_pid: object, *, proc: str = "/proc") -> bool:
    """Whether the container's init (host pid) is gone or has no live child:
    its executor, the init's only child, is dead (a zombie not yet reaped
    counts as dead). False when unknown."""
    if not isinstance(container_pid, int) or container_pid <= 0:
        return False
    try:
        with open(f"{proc}/{container_pid}/task/{container_pid}/children", "rb") as listing:
            children = listing.read().split()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return all(_dead(proc, child.decode()) for child in children)


def _dead(proc: str, pid: str) -> bool:
    try:
        state = _status_fields(int(pid), proc).get("State", "")
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return state[:1] in ("Z", "X")


def _status_fields(pid: int, proc: str = "/proc") -> dict[str, str]:
    """The fields of ``/proc/<pid>/status`` (OSError if it cannot be read)."""
    with open(f"{proc}/{pid}/status", encoding="ascii", errors="replace") as status:
        return {key: value.strip() for key, _, value in (line.partition(":") for line in status)}


def _status(pid: int) -> tuple[int, list[int]]:
    """PPid and NSpid (host first, innermost last) of a host pid."""
    try:
        fields = _status_fields(pid)
        ppid = int(fields.get("PPid", "-1"))
        nspids = [int(part) for part in fields.get("NSpid", "").split()]
    except (OSError, ValueError) as exc:
        raise DirectUnavailable(f"cannot read the listener's status: {exc}") from None
    return ppid, nspids

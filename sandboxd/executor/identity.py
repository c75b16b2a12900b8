"""Who the executor acts as: itself (root) or the sandbox user, per thread.

In a Docker workspace the executor runs as root with three capabilities
(SETUID, SETGID, KILL) and the workload runs as the sandbox user, so the
workload can neither signal the executor nor touch what it keeps. File work
the executor does on the workload's behalf must still carry the sandbox
user's rights (a root-owned 0600 file stays unreadable; new files belong to
1000:1000), so every worker thread switches its own *effective* uid/gid to
the sandbox user with the raw ``setresuid``/``setresgid`` system calls: the
kernel keeps credentials per thread, and only glibc's wrappers broadcast a
change to the whole process. ``setfsuid`` would be the narrower tool, but
gVisor does not implement it; per-thread effective ids work under runc and
runsc alike. The real and saved ids stay 0, so a thread can switch back
(``as_executor``) to write the executor's own root-owned state, and the
process as a whole stays unsignalable by the sandbox user.

A child started from a thread acting as the sandbox user (``spawn``) sets its
real, effective and saved ids to that user, which the kernel allows without
a capability and which empties the child's permitted and effective
capability sets. With no ``enable`` (the local backend, tests) nothing is
switched: everything runs as the current user.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
from collections.abc import Iterator
from dataclasses import dataclass

#: The bootstrap argument that turns privilege separation on
#: (executor.bundle puts it on the container's command line).
SEPARATE = "separate"
#: The sandbox user of the workspace image (images/workspace).
SANDBOX_UID = 1000
SANDBOX_GID = 1000

# setresuid, setresgid per architecture: the raw calls, not glibc's wrappers.
_SYSCALLS = {"x86_64": (117, 119), "aarch64": (147, 149)}
_KEEP = -1


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int


_active: Identity | None = None
_libc: ctypes.CDLL | None = None


def active() -> Identity | None:
    """The sandbox user when privilege separation is on, else None."""
    return _active


def _setres(number: int, value: int) -> None:
    assert _libc is not None
    if _libc.syscall(number, _KEEP, value, _KEEP) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot switch the thread's identity: {os.strerror(err)}")


def enable(uid: int = SANDBOX_UID, gid: int = SANDBOX_GID) -> None:
    """Turn privilege separation on for this process; call before any thread starts.

    Drops every supplementary group of the process (all threads) and makes
    the calling thread act as the sandbox user.
    """
    global _active, _libc
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        raise OSError(f"privilege separation is not supported on {platform.machine()}")
    _libc = ctypes.CDLL(None, use_errno=True)
    # glibc's setgroups applies to every thread; nothing else runs yet.
    os.setgroups([])
    _active = Identity(uid, gid)
    become_user()


def become_user() -> None:
    """Make the calling thread act as the sandbox user (idempotent)."""
    if _active is None:
        return
    uid_call, gid_call = _SYSCALLS[platform.machine()]
    if os.geteuid() == _active.uid and os.getegid() == _active.gid:
        return
    # The group first: changing it needs CAP_SETGID, which the uid switch clears.
    _setres(gid_call, _active.gid)
    _setres(uid_call, _active.uid)


@contextlib.contextmanager
def as_executor() -> Iterator[None]:
    """Act as the executor (root) for the block, then as the sandbox user again.

    Only for the executor's own state (full bash logs): the real and saved
    ids are 0, so switching back needs no capability.
    """
    if _active is None:
        yield
        return
    uid_call, gid_call = _SYSCALLS[platform.machine()]
    _setres(uid_call, 0)
    try:
        _setres(gid_call, 0)
        yield
    finally:
        become_user()

"""Each call's processes in a Landlock domain of their own (issue 23, item 5).

Processes of the sandbox user are each other's: a process left by one call
could ptrace a later call's processes (and turn their ``exit_group(3)`` into
``exit_group(0)``) or reopen their output through ``/proc/<pid>/fd`` and
write into it. Landlock scopes ptrace by domain: a task may trace, or reach
the ``/proc/<pid>`` files ptrace guards (fd, mem, environ, ...), only of a
task in its own domain or one nested in it. So every process the executor
starts (``spawn``) is started by a short-lived thread that first enters a
fresh domain; the process and its descendants share it and nothing else
does. Within one call, a debugger run by the command traces its children as
before; across calls, ``gdb -p``, ``strace -p``, ``py-spy dump --pid``,
``lsof -p`` and reading another call's ``/proc/<pid>/environ`` are refused.
``SandboxOptions.allow_ptrace`` turns it off for a sandbox.

The domain restricts nothing else: its ruleset handles only making block
devices and reparenting files (``REFER``, which any domain would otherwise
forbid across folders) and grants both beneath ``/``; no scope (signals and
abstract sockets reach other calls as before: ``kill`` of a background job
from a later call keeps working). It needs Landlock ABI 2 (Linux 5.19) and a
seccomp profile that lets the syscalls through (Docker's default does);
gVisor has no Landlock, and there its own ptrace scope (Yama, "relational")
refuses an attach from a process that is not an ancestor. The channels the
executor reads (pipes, the bash state file) are made root's, mode 0600, in
both cases, so no other process of the sandbox user can reopen them.
"""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import errno
import os
import platform
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: the
# same numbers on x86_64 and aarch64 (the common syscall table).
_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446
_ARCHES = ("x86_64", "aarch64")
_CREATE_RULESET_VERSION = 1
_ACCESS_FS_MAKE_BLOCK = 1 << 11
_ACCESS_FS_REFER = 1 << 13
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
#: REFER: from ABI 2 on; without it a domain forbids rename/link across folders.
MIN_ABI = 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc: ctypes.CDLL | None = None
_ruleset = -1
_checked = False
_abi = 0
#: Calls start in a domain of their own (the sandbox's choice: not allow_ptrace).
enabled = True


def abi() -> int:
    """The kernel's Landlock ABI, 0 where there is none (gVisor, old kernels,
    a seccomp profile that refuses it, another architecture)."""
    global _checked, _abi, _libc
    if not _checked:
        _checked = True
        if platform.machine() in _ARCHES:
            with contextlib.suppress(OSError, AttributeError):
                _libc = ctypes.CDLL(None, use_errno=True)
                found = _libc.syscall(_CREATE, None, 0, _CREATE_RULESET_VERSION)
                _abi = max(int(found), 0)
    return _abi


def active() -> bool:
    """Calls are isolated from each other by Landlock here and now."""
    return enabled and abi() >= MIN_ABI and _prepare()


def mode() -> str:
    """How calls are kept apart, for hello: "landlock", or "off" with the reason."""
    if not enabled:
        return "off: allow_ptrace"
    found = abi()
    if found < MIN_ABI:
        return f"off: no Landlock ABI {MIN_ABI} (found {found})"
    return "landlock" if _prepare() else "off: the Landlock ruleset could not be made"


def _prepare() -> bool:
    """The ruleset every call's domain is made from, once; False if it cannot be."""
    global _ruleset
    if _ruleset >= 0:
        return True
    assert _libc is not None
    handled = _ACCESS_FS_MAKE_BLOCK | _ACCESS_FS_REFER
    attr = _RulesetAttr(handled)
    fd = _libc.syscall(_CREATE, ctypes.byref(attr), ctypes.sizeof(attr), 0)
    if fd < 0:
        return False
    root = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneath(handled, root)
        if _libc.syscall(_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            os.close(fd)
            return False
    finally:
        os.close(root)
    os.set_inheritable(fd, False)
    _ruleset = fd
    return True


def _enter_domain() -> None:
    """Put the calling thread (and what it starts from now on) in a new domain."""
    assert _libc is not None
    # Per thread: a container has it already (no-new-privileges); a host
    # process (the local backend, tests) gets it on this thread only.
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot set no_new_privs: {os.strerror(err)}")
    if _libc.syscall(_RESTRICT, _ruleset, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot enter a Landlock domain: {os.strerror(err)}")


def in_own_domain(start: Callable[[], T]) -> T:
    """``start()`` (which starts a process) on a thread in a new domain.

    A domain cannot be left, so each thread serves once and ends; it has the
    caller's identity (threads copy their creator's credentials). One such
    thread waits ready (``_Spawner``): a start hands it the work and leaves
    a new one to be made beside the process it started, so the thread's
    start and the domain's making are off the call's path.
    """
    if abi() < MIN_ABI or not _prepare():
        raise OSError(errno.ENOSYS, f"no Landlock domain can be made here ({mode()})")
    global _standby
    with _standby_guard:
        spawner, _standby = _standby, None
    if spawner is None:
        spawner = _Spawner()
    try:
        return spawner.run(start)
    finally:
        _make_standby()


def _make_standby() -> None:
    global _standby
    made: _Spawner | None
    try:
        made = _Spawner()
    except BlockingIOError:
        return  # out of threads: the next start makes its own
    with _standby_guard:
        if _standby is None:
            _standby, made = made, None
    if made is not None:
        made.discard()


class _Spawner:
    """A thread already in a fresh domain, waiting for one start to run."""

    def __init__(self) -> None:
        self._go = _thread.allocate_lock()
        self._go.acquire()
        self._done = _thread.allocate_lock()
        self._done.acquire()
        self._start: Callable[[], object] | None = None
        self._outcome: list[object] = []
        self._failure: list[BaseException] = []
        try:
            _thread.start_new_thread(self._serve, ())
        except RuntimeError as exc:  # out of threads: the pids limit, as a fork would say
            raise BlockingIOError(errno.EAGAIN, f"cannot start a thread: {exc}") from exc

    def _serve(self) -> None:
        try:
            _enter_domain()
        except BaseException as exc:  # reported to the start it was made for
            self._failure.append(exc)
        self._go.acquire()
        start = self._start
        if start is None:
            return  # discarded
        try:
            if not self._failure:
                self._outcome.append(start())
        except BaseException as exc:  # handed to the caller's thread
            self._failure.append(exc)
        finally:
            self._done.release()

    def run(self, start: Callable[[], T]) -> T:
        self._start = start
        self._go.release()
        self._done.acquire()
        if self._failure:
            raise self._failure[0]
        return self._outcome[0]  # type: ignore[return-value]

    def discard(self) -> None:
        self._go.release()


_standby: _Spawner | None = None
_standby_guard = _thread.allocate_lock()

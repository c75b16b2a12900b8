"""Start a child as the sandbox user without forking the executor.

CPython cannot use vfork for a child that changes its user, so every such
``Popen`` copied the executor's page tables and paid copy-on-write faults,
holding the GIL (~1.3 ms per bash call). Here glibc's ``posix_spawn`` (a
``CLONE_VFORK`` child sharing the executor's memory until its exec) starts
``setpriv``, which sets the real, effective and saved ids to the sandbox
user and becomes the command. The result is the child ``Popen`` made:

- ids: ``setpriv --reuid/--regid`` calls ``setresuid``/``setresgid`` with
  all three ids the user's (Popen: ``setregid``/``setreuid``, the same end
  state); supplementary groups kept, and the executor has none
  (``identity.enable``); capabilities: none (leaving uid 0 clears them; the
  bounding and inheritable sets are inherited unchanged, as with a fork);
- the spawn runs on a thread acting as the sandbox user, so the ``chdir``
  (a file action) is checked with the user's rights, as Popen's was;
- descriptors: stdin/stdout/stderr by ``dup2``, ``pass_fds`` kept (a
  ``dup2`` onto itself clears close-on-exec), every other one closed;
- a new session when asked, SIGPIPE and SIGXFSZ back to their defaults
  (``restore_signals``), the signal mask, rlimits and umask inherited.

Used only where privilege separation is on and ``setpriv`` exists; anything
else (a terminal, a ``preexec_fn``, a umask) takes Popen's own path.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from sandboxd.executor import environment

#: A/B switch (``SANDBOXD_SPAWN_VFORK=0``: every child by Popen's fork).
ENABLED = os.environ.get("SANDBOXD_SPAWN_VFORK", "1") != "0"

# <spawn.h> flags (glibc).
_SETPGROUP = 0x02
_SETSIGDEF = 0x04
_SETSIGMASK = 0x08
_SETSID = 0x80
# Opaque glibc structures: posix_spawn_file_actions_t is 80 bytes,
# posix_spawnattr_t 336, sigset_t 128 on x86_64 and aarch64; room to spare.
_ACTIONS_SIZE = 256
_ATTR_SIZE = 512
_SIGSET_SIZE = 256


class _Libc:
    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        ptr, cint, cchar = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        argv_t = ctypes.POINTER(ctypes.c_char_p)
        self.spawn = libc.posix_spawn
        self.spawn.argtypes = [ctypes.POINTER(cint), cchar, ptr, ptr, argv_t, argv_t]
        self.spawn.restype = cint
        for name in (
            "posix_spawn_file_actions_init",
            "posix_spawn_file_actions_destroy",
            "posix_spawnattr_init",
            "posix_spawnattr_destroy",
            "sigemptyset",
        ):
            getattr(libc, name).argtypes = [ptr]
        self.actions_init = libc.posix_spawn_file_actions_init
        self.actions_destroy = libc.posix_spawn_file_actions_destroy
        self.adddup2 = libc.posix_spawn_file_actions_adddup2
        self.adddup2.argtypes = [ptr, cint, cint]
        self.addclose = libc.posix_spawn_file_actions_addclose
        self.addclose.argtypes = [ptr, cint]
        self.addchdir = libc.posix_spawn_file_actions_addchdir_np
        self.addchdir.argtypes = [ptr, cchar]
        self.addclosefrom = libc.posix_spawn_file_actions_addclosefrom_np
        self.addclosefrom.argtypes = [ptr, cint]
        self.attr_init = libc.posix_spawnattr_init
        self.attr_destroy = libc.posix_spawnattr_destroy
        self.setflags = libc.posix_spawnattr_setflags
        self.setflags.argtypes = [ptr, ctypes.c_short]
        self.setsigdefault = libc.posix_spawnattr_setsigdefault
        self.setsigdefault.argtypes = [ptr, ptr]
        self.setsigmask = libc.posix_spawnattr_setsigmask
        self.setsigmask.argtypes = [ptr, ptr]
        self.setpgroup = libc.posix_spawnattr_setpgroup
        self.setpgroup.argtypes = [ptr, cint]
        self.sigemptyset = libc.sigemptyset
        self.sigaddset = libc.sigaddset
        self.sigaddset.argtypes = [ptr, cint]


_libc: _Libc | None = None
_setpriv: str | None = None
_checked = False


def setpriv() -> str | None:
    """The setpriv program, or None where this module cannot be used."""
    global _libc, _setpriv, _checked
    if not _checked:
        _checked = True
        # A fixed, root-owned file: the executor's PATH is not the workload's
        # to choose (environment), and setpriv starts with a real uid of 0.
        path = environment.system_program("setpriv")
        if path is not None:
            try:
                _libc = _Libc()
            except (OSError, AttributeError):  # a libc without the _np actions (glibc < 2.34)
                path = None
        _setpriv = path
    return _setpriv if ENABLED else None


def runnable(program: str, env: Mapping[str, str] | None, cwd: str = "") -> bool:
    """``program`` resolves to a file the calling thread's user may execute
    (a relative path from ``cwd``, where the child starts).

    Checked before the spawn so that a missing or forbidden program raises as
    Popen's would (setpriv would only exit 127/126 with a message).
    """
    path = os.path.join(cwd, program)
    if "/" not in program:
        search = (env if env is not None else os.environ).get("PATH", os.defpath)
        found = shutil.which(program, path=search)
        if found is None:
            return False
        path = found
    # effective_ids: the thread's own (the sandbox user's), not the process's real root.
    return os.path.isfile(path) and os.access(path, os.X_OK, effective_ids=True)


class UserPopen(subprocess.Popen[bytes]):
    """A Popen whose child is started by ``posix_spawn`` of ``setpriv``."""

    def _execute_child(  # type: ignore[override]
        self,
        args: Sequence[str],
        executable: str | None,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Sequence[int],
        cwd: str | None,
        env: Mapping[str, str] | None,
        startupinfo: Any,
        creationflags: int,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        restore_signals: bool,
        gid: int | None,
        gids: Any,
        uid: int | None,
        umask: int,
        start_new_session: bool,
        process_group: int | None = None,  # 3.11+ (on 3.10, the local backend's Popen has none)
    ) -> None:
        program = setpriv()
        plain = (
            program is None
            or _libc is None
            or uid is None
            or gid is None
            or preexec_fn is not None
            or not close_fds
            or gids is not None
            or umask != -1
            or shell
            or executable is not None
            or any(0 <= fd < 3 for fd in (p2cread, c2pwrite, errwrite))
        )
        if plain:
            since_3_11 = (process_group,) if sys.version_info >= (3, 11) else ()
            super()._execute_child(  # type: ignore[misc]
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread,
                errwrite, restore_signals, gid, gids, uid, umask, start_new_session,
                *since_3_11,
            )  # fmt: skip
            return
        assert program is not None and _libc is not None
        argv = [
            program, f"--reuid={uid}", f"--regid={gid}", "--keep-groups", "--", *args,
        ]  # fmt: skip
        try:
            self.pid = _spawn(
                _libc,
                program,
                argv,
                env,
                stdio=(p2cread, c2pwrite, errwrite),
                keep=tuple(sorted(set(pass_fds))),
                cwd=cwd,
                new_session=start_new_session,
                process_group=process_group,
                restore_signals=restore_signals,
            )
            self._child_created = True
        finally:
            # The child's ends (and /dev/null), as Popen closes them after its fork.
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]


def _array(items: Sequence[bytes]) -> Any:
    return (ctypes.c_char_p * (len(items) + 1))(*items, None)


def _spawn(
    libc: _Libc,
    program: str,
    argv: Sequence[str],
    env: Mapping[str, str] | None,
    *,
    stdio: tuple[int, int, int],
    keep: tuple[int, ...],
    cwd: str | None,
    new_session: bool,
    process_group: int | None,
    restore_signals: bool,
) -> int:
    actions = ctypes.create_string_buffer(_ACTIONS_SIZE)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    sigdef = ctypes.create_string_buffer(_SIGSET_SIZE)
    libc.actions_init(actions)
    libc.attr_init(attr)
    try:
        for target, source in enumerate(stdio):
            if source != -1:
                _check(libc.adddup2(actions, source, target))
        for fd in keep:
            # Onto itself: glibc clears close-on-exec (it was set by Python).
            _check(libc.adddup2(actions, fd, fd))
        # Close everything else, as close_fds does: the gaps below the last
        # kept descriptor one by one (only those open now), the rest at once.
        top = keep[-1] if keep else 2
        for fd in range(3, top):
            if fd not in keep and _is_open(fd):
                _check(libc.addclose(actions, fd))
        _check(libc.addclosefrom(actions, top + 1))
        if cwd is not None:
            _check(libc.addchdir(actions, os.fsencode(cwd)))
        # A fresh process blocks nothing, whichever executor thread (and its
        # mask) spawns it: a blocked SIGTERM would outlive exec in the workload.
        nothing = ctypes.create_string_buffer(_SIGSET_SIZE)
        libc.sigemptyset(nothing)
        _check(libc.setsigmask(attr, nothing))
        flags = _SETSIGMASK
        if restore_signals:
            libc.sigemptyset(sigdef)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                libc.sigaddset(sigdef, sig)
            _check(libc.setsigdefault(attr, sigdef))
            flags |= _SETSIGDEF
        if new_session:
            flags |= _SETSID
        if process_group is not None and process_group >= 0:
            _check(libc.setpgroup(attr, process_group))
            flags |= _SETPGROUP
        _check(libc.setflags(attr, flags))
        environ: Mapping[bytes, bytes] = (
            os.environb if env is None else {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
        )
        if any(b"=" in k for k in environ):
            raise ValueError("illegal environment variable name")
        envp = _array([k + b"=" + v for k, v in environ.items()])
        pid = ctypes.c_int()
        # ctypes lets go of the GIL for the call: the executor's other
        # threads run while the child starts.
        err = libc.spawn(
            ctypes.byref(pid),
            os.fsencode(program),
            actions,
            attr,
            _array([os.fsencode(a) for a in argv]),
            envp,
        )
        if err:
            raise OSError(err, os.strerror(err), cwd)
        return pid.value
    finally:
        libc.actions_destroy(actions)
        libc.attr_destroy(attr)


def _check(err: int) -> None:
    if err:
        raise OSError(err, os.strerror(err))


def _is_open(fd: int) -> bool:
    try:
        os.get_inheritable(fd)
    except OSError:
        return False
    return True

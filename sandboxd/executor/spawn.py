"""The one place the executor starts a process of the workload.

Every child (``exec``, the bash tool, background jobs, ripgrep) goes through
``spawn`` so that what a child may inherit — its session, its file
descriptors, and later its identity — is decided once, not at each call site.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

from sandboxd.contract.errors import InvalidArgument, NotFound, PermissionDenied, ResourceExhausted
from sandboxd.executor import identity, isolation, oomscore, vspawn

Target = int | IO[Any] | None


def spawn(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str] | None = None,
    stdin: Target = subprocess.DEVNULL,
    stdout: Target = subprocess.PIPE,
    stderr: Target = subprocess.PIPE,
    new_session: bool = True,
    terminal: int | None = None,
    pass_fds: Sequence[int] = (),
    score_after: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``argv``; a new session (its own process group) unless told otherwise.

    A new session lets a timeout or a kill reach every descendant with one
    ``killpg``; no descriptor of the executor leaks into the child but
    ``pass_fds``. Under privilege separation (``identity``) the child runs as
    the sandbox user with real, effective and saved ids all set, so it holds
    no capability and cannot signal or trace the executor.

    ``terminal`` is the slave end of a pseudo-terminal: it becomes the
    child's stdin, stdout, stderr and controlling terminal (so ``tty``,
    job control and SIGWINCH work), in a session of its own.

    Under privilege separation the child is the OOM killer's first choice
    before its first instruction (``oomscore``). ``score_after``: the score
    may be written after the spawn instead, saving the ``choom`` exec, because
    the child starts nothing before the executor lets it (a shell started
    ahead waits for its go) or starts no process at all (ripgrep); if that
    write is refused, the child is stopped and OSError raised.
    """
    if terminal is not None:
        stdin = stdout = stderr = terminal
        new_session = True
        # No preexec_fn: Python code between fork and exec in a threaded
        # process can deadlock or crash (it did: SIGSEGV under grpc's
        # threads). A tiny interpreter takes the terminal, then execs.
        argv = [sys.executable, "-I", "-S", "-c", _TAKE_TERMINAL, *argv]
    user = identity.active()
    popen: type[subprocess.Popen[bytes]] = _Popen
    scored = None
    if user is not None:
        # The child (fork or vfork) copies this thread's credentials: it must act as
        # the user, so the child's chdir and exec are checked with its rights
        # and the id change below needs no capability.
        identity.become_user()
        runnable = vspawn.runnable(argv[0], env, cwd)
        if terminal is None and vspawn.setpriv() is not None and runnable:
            # No fork of the executor: setpriv makes the same child (vspawn).
            popen = _UserPopen
        if runnable and not score_after:
            # Not for a program that cannot run: Popen raises its error, as before.
            scored = oomscore.scored(argv)

    def start() -> subprocess.Popen[bytes]:
        return popen(
            scored or list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=new_session,
            close_fds=True,
            pass_fds=tuple(pass_fds),
            user=None if user is None else user.uid,
            group=None if user is None else user.gid,
        )

    if user is None:
        return start()
    # Apart from every other call's processes (executor.isolation).
    proc = isolation.in_own_domain(start) if isolation.active() else start()
    if scored is None and not oomscore.raise_now(proc.pid) and score_after:
        _stop(proc)
        raise OSError(errno.EPERM, "cannot make the child the OOM killer's first choice")
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()  # it has started nothing
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def spawn_command(
    command: Sequence[str], *, cwd: str, env: Mapping[str, str], **kwargs: Any
) -> subprocess.Popen[bytes]:
    """``spawn`` of a command a caller named (Exec, a process): every way its
    start can fail is a typed error that names the cause, never an OSError
    (answered INTERNAL)."""
    if not command or not command[0]:
        raise InvalidArgument("argv must name a program")
    if not os.path.isdir(cwd):
        raise NotFound(f"working directory {cwd} does not exist")
    # On a worker thread acting as the sandbox user: the check is the user's.
    if not os.access(cwd, os.X_OK, effective_ids=True):
        raise PermissionDenied(f"working directory {cwd} is not accessible to the sandbox user")
    try:
        return spawn(command, cwd=cwd, env=env, **kwargs)
    except FileNotFoundError as exc:
        raise NotFound(f"program not found: {command[0]}") from exc
    except PermissionError as exc:
        if exc.filename == cwd:  # the chdir, raced with a chmod
            raise PermissionDenied(f"working directory {cwd} is not accessible") from exc
        raise PermissionDenied(f"program not executable: {command[0]}") from exc
    except BlockingIOError as exc:
        raise ResourceExhausted(
            "cannot start a process: the sandbox reached its pids limit; stop some processes "
            "or restart the sandbox"
        ) from exc
    except OSError as exc:
        # E2BIG from Linux; gVisor answers ENAMETOOLONG for an over-long argument.
        if exc.errno not in (errno.E2BIG, errno.ENAMETOOLONG):
            raise
        size = sum(len(part) + 1 for part in (*command, *(f"{k}={v}" for k, v in env.items())))
        code = errno.errorcode[exc.errno]
        raise InvalidArgument(
            f"the command and its environment ({size} bytes, {len(command)} arguments, "
            f"{len(env)} variables) are more than this sandbox's kernel takes ({code}: at "
            f"most {_arg_max()} bytes in all, {_MAX_ARG_STRLEN - 1} per argument or KEY=VALUE)"
        ) from exc


#: Linux's MAX_ARG_STRLEN (contract.validation.MAX_ARG_STRLEN, which the
#: executor may not import; tests/unit/test_spawn_errors.py holds them equal).
_MAX_ARG_STRLEN = 32 * 4096


def _arg_max() -> int:
    try:
        return os.sysconf("SC_ARG_MAX")
    except (OSError, ValueError):
        return 2 << 20


class _RootPipes(subprocess.Popen[bytes]):
    """The child's pipes made as the executor: root's, mode 0600.

    The child holds its ends already; another process of the sandbox user
    cannot reopen them through /proc/<pid>/fd to write into this call's
    output or read its input (executor.isolation).
    """

    def _get_handles(self, stdin: Any, stdout: Any, stderr: Any) -> Any:
        with identity.as_executor():
            return super()._get_handles(stdin, stdout, stderr)  # type: ignore[misc]


class _Popen(_RootPipes):
    pass


class _UserPopen(_RootPipes, vspawn.UserPopen):
    pass


#: Runs as the child, a session leader with the terminal on fd 0: makes it
#: the controlling terminal (so tty, job control and SIGWINCH work), then
#: becomes the command (127, like a shell, when there is no such program).
_TAKE_TERMINAL = """
import fcntl, os, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
try:
    os.execvp(sys.argv[1], sys.argv[1:])
except OSError as exc:
    sys.stderr.write(f"{sys.argv[1]}: {exc.strerror}\\n")
    os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""

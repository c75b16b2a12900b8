"""The one place the executor starts a process of the workload.

Every child (``exec``, the bash tool, background jobs, ripgrep) goes through
``spawn`` so that what a child may inherit — its session, its file
descriptors, and later its identity — is decided once, not at each call site.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

from sandboxd.executor import identity, vspawn

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
    """
    if terminal is not None:
        stdin = stdout = stderr = terminal
        new_session = True
        # No preexec_fn: Python code between fork and exec in a threaded
        # process can deadlock or crash (it did: SIGSEGV under grpc's
        # threads). A tiny interpreter takes the terminal, then execs.
        argv = [sys.executable, "-I", "-S", "-c", _TAKE_TERMINAL, *argv]
    user = identity.active()
    popen: type[subprocess.Popen[bytes]] = subprocess.Popen
    if user is not None:
        # The child (fork or vfork) copies this thread's credentials: it must act as
        # the user, so the child's chdir and exec are checked with its rights
        # and the id change below needs no capability.
        identity.become_user()
        if terminal is None and vspawn.setpriv() is not None and vspawn.runnable(argv[0], env):
            # No fork of the executor: setpriv makes the same child (vspawn).
            popen = vspawn.UserPopen
    return popen(
        list(argv),
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

"""The one place the executor starts a process of the workload.

Every child (``exec``, the bash tool, background jobs, ripgrep) goes through
``spawn`` so that what a child may inherit — its session, its file
descriptors, and later its identity — is decided once, not at each call site.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Any

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
) -> subprocess.Popen[bytes]:
    """Start ``argv``; a new session (its own process group) unless told otherwise.

    A new session lets a timeout or a kill reach every descendant with one
    ``killpg``; no descriptor of the executor leaks into the child.
    """
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=new_session,
        close_fds=True,
    )

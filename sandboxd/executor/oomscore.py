"""The workload is the OOM killer's first choice from its first instruction.

At a sandbox's memory limit the kernel kills the process of the highest
score: its size plus ``oom_score_adj`` in thousandths of the limit. The
executor and the init keep the container's value (0: the lowest this host
allows; below it needs ``CAP_SYS_RESOURCE``, SECURITY.md item 6) and every
workload process gets ``WORKLOAD_OOM_SCORE_ADJ``, so the kernel takes
workload processes while any is left (issue 23, item 6).

The value must be in place before the child runs any instruction of its
own. A child inherits its parent's value when it forks, so a process forked
while its parent was still at 0 keeps 0 for good, and if it is smaller
than the executor (about 21 MB of Python) the executor is the one killed.
The executor used to write the value right after the spawn returned; on a
loaded host its thread (waiting for the GIL, or preempted) wrote it
milliseconds late: 19% of ``exec cat /proc/self/oom_score_adj`` read 0,
28% of ``sh -c 'cat …'``, and one CI run of the 60-process flood lost the
executor (tests/hostile/test_oom_choice.py). No spawn primitive can run a
write in the child before its exec (posix_spawn's child shares the
executor's memory until then, and a write to a process sharing it would set
the executor's value too), so the child's first program is ``choom`` (the
system's, util-linux, beside setpriv): it raises its own value, which needs
no capability, then becomes the command. That costs one exec (~0.6-1 ms of
the child's CPU on a loaded 2-core host). A child held until the executor
lets it go (a shell started ahead waits for its command) needs no wrapper:
the write after the spawn comes before the go; nor does ripgrep, which
starts no process, so its own first milliseconds at 0 leave nothing behind.
Without ``choom`` in the image every child is written after its spawn, as
before (the window stays).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from sandboxd.executor import environment, identity

#: Every workload process's oom_score_adj (its descendants inherit it).
WORKLOAD_OOM_SCORE_ADJ = 1000

_choom: str | None = None
_checked = False


def choom() -> str | None:
    """The system's ``choom`` (a fixed, root-owned path, never from ``PATH``), or None."""
    global _choom, _checked
    if not _checked:
        # Found before it is marked found: the first spawns come on several
        # threads at once, and one must not take "not looked up yet" for "none".
        _choom = environment.system_program("choom")
        _checked = True
    return _choom


def scored(argv: Sequence[str]) -> list[str] | None:
    """``argv`` behind ``choom``: the process is at ``WORKLOAD_OOM_SCORE_ADJ``
    before the command starts; None where there is no ``choom``."""
    program = choom()
    if program is None:
        return None
    return [program, "-n", str(WORKLOAD_OOM_SCORE_ADJ), "--", *argv]


def raise_now(pid: int) -> bool:
    """Write ``pid``'s value from outside; False if that was refused (True
    when it is written, or when the process has exited already).

    Raising a value needs no capability, but the file's owner changes under
    the write, one way: root's while the child is still setpriv (not
    dumpable: nearly always, this soon after the spawn), the sandbox user's
    once it runs the command, root's again once it has exited (a zombie has no
    memory to be dumpable). So it is tried as the executor (root, without
    DAC_OVERRIDE), as the user, and as the executor again: a ripgrep done with
    one small file in between the first two tries was refused twice (one
    grep answered "cannot make the child the OOM killer's first choice" in a
    CI run).
    """
    value = str(WORKLOAD_OOM_SCORE_ADJ).encode()
    for acting in (identity.as_executor, contextlib.nullcontext, identity.as_executor):
        try:
            with acting():
                fd = os.open(f"/proc/{pid}/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, value)
                finally:
                    os.close(fd)
            return True
        except PermissionError:
            continue
        except (FileNotFoundError, ProcessLookupError):
            return True  # it exited already: nothing of it runs at 0
    return False

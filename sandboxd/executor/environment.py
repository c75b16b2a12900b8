"""The executor's own environment, and the workload's.

The executor runs as root, so nothing a sandbox's options or files can set
may choose what it runs (issue 23, item 2). The container's environment is
the executor's: it holds what the image and the daemon put there and never
``SandboxOptions.env``, where a ``PATH`` starting at a workspace folder made
the engine start a planted ``python3`` as the container's command and the
executor run a planted ``setpriv`` with its capabilities, and where
``LD_PRELOAD`` would load a planted library into the root process. The
options' environment reaches the executor in ``hello`` and goes to the
workload's processes only. The one program the executor starts before its
child is the sandbox user (``setpriv``) is found at a fixed absolute path,
owned by root and writable by no one else, never on a ``PATH``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping

#: The executor's A/B switches (performance measurements: bench/README.md). A
#: sandbox's env may set them; they are the only keys of it the daemon copies
#: into the container's environment, and only with a value of SWITCH_VALUE.
SWITCHES = frozenset(
    {"SANDBOXD_BASH_AHEAD", "SANDBOXD_SPAWN_VFORK", "SANDBOXD_QUICK_INLINE", "SANDBOXD_GREP_ENGINE"}
)
SWITCH_VALUE = re.compile(r"[a-z0-9]{1,16}")
#: Where the programs the executor runs with privileges are looked for, in order.
SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")


def container_env(options_env: Mapping[str, str]) -> dict[str, str]:
    """What of a sandbox's env also goes into its container's (the executor's) environment."""
    return {
        key: value
        for key, value in options_env.items()
        if key in SWITCHES and SWITCH_VALUE.fullmatch(value)
    }


def trusted(path: str) -> bool:
    """``path`` is an executable regular file that only root can change: it and
    every folder on the way to it (symlinks resolved) are root's and writable
    by no group and no one else."""
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or not info.st_mode & 0o111:
        return False
    folder = real
    while True:
        try:
            info = os.lstat(folder)
        except OSError:
            return False
        if info.st_uid != 0 or info.st_mode & 0o022:
            return False
        parent = os.path.dirname(folder)
        if parent == folder:
            return True
        folder = parent


def system_program(name: str, folders: tuple[str, ...] = SYSTEM_DIRS) -> str | None:
    """The absolute path of the system's ``name``, or None; never from ``PATH``."""
    for folder in folders:
        candidate = os.path.join(folder, name)
        if trusted(candidate):
            return candidate
    return None

"""What each container runtime is, as the Docker engine has it registered.

``docker info`` lists the runtimes (name -> binary path and runtimeArgs); the
binary's own ``--version`` says which build it is.  That matters most for
gVisor, whose syscall coverage changes from build to build (Debian 12's 2022
runsc cannot run ``ls -l``), so GetStatus shows it rather than leaving an
operator to guess.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from sandboxd.contract.models import Runtime, RuntimeInfo, SandboxOptions

log = logging.getLogger(__name__)

#: Bounds on probing a runtime binary: it is root's config, but still a process.
VERSION_TIMEOUT_S = 5.0
VERSION_MAX_CHARS = 200


def platform_of(runtime_args: Sequence[str]) -> str:
    """The ``--platform`` a runsc registration passes; "" when runsc picks."""
    for i, arg in enumerate(runtime_args):
        for prefix in ("--platform=", "-platform="):
            if arg.startswith(prefix):
                return arg[len(prefix) :]
        if arg in ("--platform", "-platform") and i + 1 < len(runtime_args):
            return runtime_args[i + 1]
    return ""


def parse_version(output: str) -> str:
    """``runsc version 0.0~20240729.0`` / ``runc version 1.1.5`` -> the version."""
    for line in output.splitlines():
        words = line.split()
        if len(words) >= 3 and words[1] == "version":
            return words[2][:VERSION_MAX_CHARS]
    return ""


def host_pids_limit(options: SandboxOptions, runsc_pids_limit: int) -> int:
    """The engine's pids limit for a container of ``options``.

    Under runc it is the workload's: its processes and threads are the
    container's tasks. Under runsc the container's tasks are gVisor's: the
    Sentry's Go threads and, with the ptrace platform, a stub process per
    guest process holding a thread for every Sentry thread that ran it (kept
    for reuse). 32 concurrent ``sh -c`` calls left 1,488 of them, 200 left
    11,834, whatever the workload itself holds. At the limit the Sentry
    cannot start a thread, and Go ends the whole sandbox (exit code 2, no
    message: gVisor issue 2490) instead of failing one fork. So a runsc
    sandbox gets the larger budget, its pids_limit when that is larger.
    """
    if options.runtime == Runtime.RUNSC:
        return max(options.pids_limit, runsc_pids_limit)
    return options.pids_limit


async def binary_version(path: str) -> str:
    """Run ``path --version`` on this host; "" if it is not here or says nothing."""
    resolved = path if path.startswith("/") else shutil.which(path)
    if not resolved:
        return ""
    try:
        with anyio.fail_after(VERSION_TIMEOUT_S):
            done = await anyio.run_process([resolved, "--version"], check=False)
    except (OSError, TimeoutError) as exc:
        log.info("runtime %s --version failed: %s", resolved, exc)
        return ""
    return parse_version(done.stdout[:4096].decode("utf-8", "replace"))


async def describe(
    engine_runtimes: Mapping[str, Any],
    version_of: Callable[[str], Awaitable[str]] = binary_version,
) -> list[RuntimeInfo]:
    """One RuntimeInfo per runtime SandboxOptions can name, in enum order."""
    found: list[RuntimeInfo] = []
    for runtime in Runtime:
        entry = engine_runtimes.get(runtime.value)
        if not isinstance(entry, Mapping):
            found.append(RuntimeInfo(name=runtime.value))
            continue
        path = str(entry.get("path") or runtime.value)
        args = [str(a) for a in entry.get("runtimeArgs") or []]
        found.append(
            RuntimeInfo(
                name=runtime.value,
                version=await version_of(path),
                platform=platform_of(args) if runtime == Runtime.RUNSC else "",
                available=True,
            )
        )
    return found

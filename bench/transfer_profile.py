"""Where a transfer's time goes: CPU seconds per process for each kind of transfer.

    python -m bench.transfer_profile            # ~1-2 min
    python -m bench.transfer_profile --spy      # plus py-spy samples of daemon and executor

For a tree upload, a tree download, a 256 MiB upload and a 256 MiB download
(one sandbox, back to back) this reads the CPU time every process on the
path spent (client = this process, daemon, dockerd, containerd, the
container's shim, the executor) from ``/proc``, next to the wall time. A
layer whose CPU is close to the wall time is the one that bounds the speed
(the executor also has its container's CPU limit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench import profile as prof
from bench import tools
from bench.transfer import MiB, log, make_tree
from runtime_client import GrpcSandboxFactory

BIG = 256 * MiB


async def _blocks(total: int) -> AsyncIterator[bytes]:
    block = os.urandom(MiB)
    for _ in range(total // MiB):
        yield block


def _spy(pid: int, out: Path, seconds: int) -> subprocess.Popen[bytes]:
    argv = [str(tools.py_spy()), "record", "--pid", str(pid), "--rate", "100", "--gil"]
    argv += ["--duration", str(seconds), "--format", "raw", "--nonblocking", "--output", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def measure(target: str, daemon_pid: int, namespace: str, scratch: Path, spy: bool) -> Any:
    import docker

    client = docker.from_env()
    tree = scratch / "tree"
    await asyncio.to_thread(make_tree, tree)
    report: dict[str, Any] = {}
    async with GrpcSandboxFactory(target) as factory:
        box = await factory.create_sandbox("profile")
        await box.call_tool("bash", {"command": "true"})
        container = f"{namespace}-profile"
        found = client.containers.list(filters={"label": f"sandboxd.namespace={namespace}"})
        container = next(c.name for c in found if c.name and c.name.endswith("profile"))
        executor, shim = prof._executor_pid(client, container)
        procs = {
            "daemon": [daemon_pid],
            "executor": [executor],
            "shim": [shim],
            "dockerd": prof._pids_named("dockerd"),
            "containerd": prof._pids_named("containerd"),
        }

        async def tree_up() -> None:
            await box.upload_tree(tree, "up")

        async def tree_down() -> None:
            await box.download_tree("up", scratch / "down")

        async def file_up() -> None:
            await box.upload("big.bin", _blocks(BIG))

        async def file_down() -> None:
            async for _ in box.download_iter("big.bin"):
                pass

        for label, run in (
            ("tree upload 10k/100MB", tree_up),
            ("tree download 10k/100MB", tree_down),
            ("upload 256 MiB", file_up),
            ("download 256 MiB", file_down),
        ):
            before = {k: sum(prof._cpu_ticks(p) for p in v) for k, v in procs.items()}
            mine = os.times()
            spies = []
            if spy:
                for who in ("daemon", "executor"):
                    out = scratch / f"spy-{label.split()[0]}-{label.split()[1]}-{who}.txt"
                    pid = daemon_pid if who == "daemon" else executor
                    spies.append((who, out, _spy(pid, out, 30)))
                await asyncio.sleep(1.0)
            started = time.perf_counter()
            await run()
            wall = time.perf_counter() - started
            after = {k: sum(prof._cpu_ticks(p) for p in v) for k, v in procs.items()}
            now = os.times()
            cpu = {k: round((after[k] - before[k]) / prof._TICK, 2) for k in procs}
            cpu["client"] = round(now.user + now.system - mine.user - mine.system, 2)
            entry: dict[str, Any] = {"wall_s": round(wall, 2), "cpu_s": cpu}
            for who, out, proc in spies:
                proc.terminate()
                await asyncio.to_thread(proc.wait)
                entry[f"py-spy {who}"] = prof._summarize_raw(out, 1)
            report[label] = entry
            log(f"{label}: wall {wall:.2f} s, cpu {cpu}")
            shutil.rmtree(scratch / "down", ignore_errors=True)
        await box.delete()
    shutil.rmtree(tree, ignore_errors=True)
    return report


def main() -> int:
    from bench.resources import Resources, interrupt_on_sigterm

    parser = argparse.ArgumentParser()
    parser.add_argument("--spy", action="store_true")
    args = parser.parse_args()
    interrupt_on_sigterm()
    res = Resources()
    try:
        daemon = res.start_daemon()
        report = asyncio.run(
            measure(daemon.target, daemon.pid, daemon.namespace, res.tmp, args.spy)
        )
    finally:
        res.close()
    report["loadavg_at_end"] = os.getloadavg()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

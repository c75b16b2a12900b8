"""CPU fairness between sandboxes (issue 15): busy sandboxes vs a bystander.

Not part of ``make bench``: run by hand, root, on an idle-as-possible host::

    python -m bench.cpu_fairness --shares 1024 512 --hogs 3 --loops 2

For each ``--shares`` value a daemon (its own namespace, no pool) starts with
``--cpu-shares``; ``--hogs`` sandboxes each run ``--loops`` endless busy loops
(each sandbox capped at its 1 CPU by ``nano_cpus``); a bystander sandbox times
a fixed CPU job (in-container wall time) and the latency of ``read_file``
through the daemon, quiet and under the hogs. ``--daemon-cgroup sibling``
moves the daemon into a cpu cgroup beside the containers' (cgroup v1, as
systemd's driver places a service next to its containers) so the daemon
competes with each sandbox on its weight; ``root`` leaves it where it is.
Everything made is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runtime_client import GrpcSandboxFactory, Sandbox

JOB = (
    "python3 -c 'import time; t = time.perf_counter(); "
    "sum(i * i for i in range(1_500_000)); print(time.perf_counter() - t)'"
)
HOG = "setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &"
CPU_V1 = Path("/sys/fs/cgroup/cpu")


def _start_daemon(folder: Path, shares: int, namespace: str) -> subprocess.Popen[bytes]:
    log = (folder / "daemon.log").open("ab")
    return subprocess.Popen(
        [
            sys.executable, "-m", "sandboxd", "serve",
            "--socket", str(folder / "d.sock"),
            "--namespace", namespace,
            "--pool-size", "0",
            "--cpu-shares", str(shares),
            "--disk-bytes", str(256 << 20),
            "--disk-dir", str(folder / "disks"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip


async def _wait_ready(target: str) -> None:
    for _ in range(300):
        try:
            async with GrpcSandboxFactory(target) as factory:
                await factory.transport.get_status()
                return
        except Exception:
            await asyncio.sleep(0.2)
    raise RuntimeError("daemon did not start")


def _move_to_sibling_cgroup(pid: int, name: str) -> Path | None:
    parent = CPU_V1 / "docker"
    if not parent.is_dir():
        return None
    group = parent / name
    group.mkdir(exist_ok=True)
    (group / "cpu.shares").write_text("1024")
    for task in os.listdir(f"/proc/{pid}/task"):
        (group / "tasks").write_text(task)
    return group


async def _job_s(box: Sandbox) -> float:
    return float((await box.exec(JOB)).stdout)


async def _read_ms(box: Sandbox, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await box.read_file("probe.txt")
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _summary(jobs: list[float], reads: list[float]) -> dict[str, float]:
    reads = sorted(reads)
    return {
        "job_s_median": round(statistics.median(jobs), 3),
        "read_p50_ms": round(reads[len(reads) // 2], 2),
        "read_p95_ms": round(reads[int(len(reads) * 0.95)], 2),
    }


async def _measure(box: Sandbox, rounds: int) -> dict[str, float]:
    jobs, reads = [], []
    for _ in range(rounds):
        jobs.append(await _job_s(box))
        reads += await _read_ms(box, 20)
    return _summary(jobs, reads)


async def _one(shares: int, args: argparse.Namespace) -> dict[str, object]:
    namespace = f"cpufair-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="sandboxd-cpufair-") as tmp:
        folder = Path(tmp)
        daemon = _start_daemon(folder, shares, namespace)
        group = None
        try:
            target = f"unix://{folder / 'd.sock'}"
            await _wait_ready(target)
            if args.daemon_cgroup == "sibling":
                group = _move_to_sibling_cgroup(daemon.pid, f"{namespace}-daemon")
            async with GrpcSandboxFactory(target) as factory:
                bystander = await factory.create_sandbox("bystander")
                hogs = [await factory.create_sandbox(f"hog{i}") for i in range(args.hogs)]
                try:
                    await bystander.write_file("probe.txt", "x" * 1024)
                    quiet = await _measure(bystander, args.rounds)
                    for hog in hogs:
                        for _ in range(args.loops):
                            await hog.exec(HOG)
                    await asyncio.sleep(2)
                    loaded = await _measure(bystander, args.rounds)
                finally:
                    for box in [bystander, *hogs]:
                        await box.delete()
        finally:
            daemon.terminate()
            daemon.wait(timeout=60)
            if group is not None:  # empty once the daemon has exited
                group.rmdir()
    return {"cpu_shares": shares, "quiet": quiet, "hogs": loaded}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shares", type=int, nargs="+", default=[1024, 512])
    parser.add_argument("--hogs", type=int, default=3)
    parser.add_argument("--loops", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--daemon-cgroup", choices=["root", "sibling"], default="root")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()}", file=sys.stderr)
    for shares in args.shares:
        result = await _one(shares, args)
        result["daemon_cgroup"] = args.daemon_cgroup
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main())

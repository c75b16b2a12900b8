"""Where a call's time goes: py-spy on the daemon and the executor, plus CPU per call.

For a read loop and a bash loop (one caller, back to back) this samples the
daemon and the executor with ``py-spy record --format raw`` and reads the
CPU time every process involved spent (client, daemon, dockerd, executor,
containerd shim) from ``/proc``. Leaf frames are bucketed into the layers
of the call path.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import docker
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench import fixtures as fx
from bench import tools
from runtime_client import Sandbox

RATE = 200
SECONDS = 6.0
_TICK = os.sysconf("SC_CLK_TCK")

#: (bucket, substrings of "file:function" that put a leaf frame in it), first match wins.
BUCKETS: list[tuple[str, tuple[str, ...]]] = [
    ("gRPC (grpc.aio / cython / core)", ("grpc/", "grpc_", "cygrpc", "cython", ".pyx")),
    ("channel + attach stream", ("backends/shared/channel", "docker/attach", "streams.py")),
    ("JSON / wire codec", ("json/", "wire.py", "_json")),
    (
        "thread hop (to_thread / executor threads)",
        ("threading.py", "concurrent/", "to_thread", "queue.py", "_thread"),
    ),
    ("asyncio event loop / selectors", ("asyncio/", "selectors.py")),
    (
        "servicer + convert + service",
        ("grpc/servicer", "contract/convert", "service/", "contract/models", "contract/validation"),
    ),
    ("protobuf", ("protobuf", "_pb2")),
    ("bash tool (spawn, pipes, wait)", ("tools/bash", "tools/output", "subprocess.py", "select")),
    ("tool code (read/grep/glob/...)", ("tools/",)),
    ("executor main / dispatch", ("executor/main", "executor/dispatch", "<string>", "<executor")),
]


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _pids_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
    return found


def _children(pid: int) -> list[int]:
    out = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(p) for p in (task / "children").read_text().split()]
    return out


def _executor_pid(client: docker.DockerClient, container_name: str) -> tuple[int, int]:
    """(executor python pid, the container's shim pid) on the host."""
    container = client.containers.get(container_name)
    init_pid = int(container.attrs["State"]["Pid"])
    pythons = [p for p in _children(init_pid) if "python" in Path(f"/proc/{p}/comm").read_text()]
    shim = int(Path(f"/proc/{init_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return (pythons[0] if pythons else init_pid), shim


def _spy(spy: Path, pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling only while the GIL is held: Python CPU, not idle waits."""
    argv = [str(spy), "record", "--pid", str(pid), "--rate", str(RATE), "--gil"]
    argv += ["--duration", str(int(SECONDS)), "--format", "raw", "--nonblocking"]
    return subprocess.Popen(
        [*argv, "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _keep(raw: Path, out_dir: Path) -> None:
    """The collapsed stacks go next to the results (flamegraph.pl / speedscope input)."""
    with contextlib.suppress(OSError):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / raw.name).write_bytes(raw.read_bytes())


def _bucket(frame: str) -> str:
    for name, needles in BUCKETS:
        if any(n in frame for n in needles):
            return name
    return "other"


def _summarize_raw(path: Path, calls: int) -> dict[str, Any]:
    """Collapsed stacks -> active samples per bucket (by leaf frame) and top leaf functions."""
    buckets: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    if not path.exists():
        return {"error": "py-spy wrote nothing"}
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        leaf = frames[-1]
        total += count
        leaves[leaf] += count
        buckets[_bucket(leaf)] += count
    ms_per_sample = 1000.0 / RATE

    def per_call(samples: int) -> float:
        return round(samples * ms_per_sample * 1000 / max(calls, 1), 1)

    return {
        "active_samples": total,
        "active_us_per_call": per_call(total),
        "buckets_us_per_call": {k: per_call(v) for k, v in buckets.most_common()},
        "top_leaves_us_per_call": {k: per_call(v) for k, v in leaves.most_common(15)},
    }


async def _loop(
    target: str, sandbox: Sandbox, tool: str, args: dict[str, Any], seconds: float
) -> int:
    """Back-to-back calls of one tool; tool "health" is a gRPC health Check (the RPC floor)."""
    calls = 0
    deadline = time.perf_counter() + seconds
    if tool == "health":
        async with grpc.aio.insecure_channel(target) as channel:  # type: ignore[no-untyped-call]
            stub = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
            while time.perf_counter() < deadline:
                await stub.Check(health_pb2.HealthCheckRequest(service=""))  # type: ignore[no-untyped-call]
                calls += 1
        return calls
    while time.perf_counter() < deadline:
        result = await sandbox.call_tool(tool, args)
        if result.is_error:
            raise RuntimeError(f"{tool} failed while profiling: {result.text[:200]}")
        calls += 1
    return calls


async def run(
    target: str,
    daemon_pid: int,
    sandbox: Sandbox,
    client: docker.DockerClient,
    container_name: str,
    tmp: Path,
    out_dir: Path,
) -> dict[str, Any]:
    try:
        spy = tools.py_spy()
    except Exception as exc:
        return {"skipped": f"py-spy unavailable: {exc}"}
    executor, shim = _executor_pid(client, container_name)
    dockerd = _pids_named("dockerd")
    containerd = _pids_named("containerd")
    report: dict[str, Any] = {}
    for label, tool, args in (
        ("health", "health", {}),
        ("read", "read", {"file_path": fx.READ_FILE}),
        ("bash", "bash", {"command": "true"}),
    ):
        await _loop(target, sandbox, tool, args, 0.5)  # warm
        procs = {"daemon": [daemon_pid], "executor": [executor], "dockerd": dockerd,
                 "containerd": containerd, "shim": [shim]}  # fmt: skip
        before = {k: sum(_cpu_ticks(p) for p in v) for k, v in procs.items()}
        client_before = os.times()
        spies = [
            (who, raw, _spy(spy, pid, raw))
            for who, pid in (("daemon", daemon_pid), ("executor", executor))
            for raw in [tmp / f"profile-{label}-{who}.txt"]
        ]
        await asyncio.sleep(0.5)  # py-spy attaches
        calls = await _loop(target, sandbox, tool, args, SECONDS - 1.0)
        after = {k: sum(_cpu_ticks(p) for p in v) for k, v in procs.items()}
        client_after = os.times()
        for _, _, proc in spies:
            await asyncio.to_thread(proc.wait)
        loop_s = SECONDS - 1.0
        cpu = {k: round((after[k] - before[k]) / _TICK * 1e6 / calls, 1) for k in procs}
        cpu["client (bench process)"] = round(
            (client_after.user + client_after.system - client_before.user - client_before.system)
            * 1e6 / calls, 1,
        )  # fmt: skip
        entry: dict[str, Any] = {
            "calls": calls,
            "calls_per_s": round(calls / loop_s, 1),
            "wall_us_per_call": round(loop_s * 1e6 / calls, 1),
            "cpu_us_per_call": cpu,
        }
        for who, raw, _ in spies:
            entry[f"py-spy {who}"] = _summarize_raw(raw, calls)
            _keep(raw, out_dir)
        report[label] = entry
    return report


def render(report: dict[str, Any]) -> str:
    if "skipped" in report:
        return f"Profile: skipped ({report['skipped']})"
    lines = ["Profile (one caller, back to back; µs per call)"]
    names = {
        "health": "gRPC health Check (the RPC floor)",
        "read": "read 1 KiB",
        "bash": "bash true",
    }
    for label, entry in report.items():
        lines.append(
            f"  {names.get(label, label)}: {entry['calls_per_s']:.0f} calls/s, "
            f"wall {entry['wall_us_per_call']:.0f} µs/call; CPU µs/call: "
            + ", ".join(f"{k} {v:.0f}" for k, v in entry["cpu_us_per_call"].items())
        )
        for who in ("daemon", "executor"):
            spy = entry.get(f"py-spy {who}", {})
            if "buckets_us_per_call" not in spy:
                continue
            lines.append(f"    py-spy {who}: {spy['active_us_per_call']:.0f} µs active/call")
            for name, us in list(spy["buckets_us_per_call"].items())[:8]:
                lines.append(f"      {us:8.0f}  {name}")
            for name, us in list(spy["top_leaves_us_per_call"].items())[:6]:
                lines.append(f"      {us:8.0f}  leaf {name}")
    return "\n".join(lines)

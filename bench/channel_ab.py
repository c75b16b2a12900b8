"""``python -m bench.channel_ab``: the executor channel, direct socket vs attach stream.

One process, two in-process Docker backends that differ only in
``direct_channel`` (SANDBOXD_DIRECT_CHANNEL), so load from elsewhere on the
machine hits both alike:

- p50 of read 1 KiB / write 1 KiB / bash true through ``Workspace.call("tool")``
  (the daemon's channel, no gRPC), A and B in alternating slices;
- CPU per read call of every process on the path (this process, dockerd,
  the container's containerd-shim, the executor), from ``/proc``, A and B
  alternating twice;
- 8 workspaces per channel, 8 concurrent callers each, read calls per second
  (alternating A, B, A, B);
- the whole tools path: two ``sandboxd serve`` children (``--direct-channel
  true`` / ``false``), p50 of the same three tools over gRPC from this
  process (alternating slices), and 8 sandboxes x 4 callers of read 1 KiB
  and 8 x 2 of bash true, as ``bench.run``'s throughput (alternating twice).

Results go to ``bench/results/channel-ab-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench import fixtures as fx
from bench import scenarios
from bench.profile import _cpu_ticks, _executor_pid, _pids_named
from bench.resources import Resources
from bench.stats import time_interleaved
from bench.subjects import TOOL_OPS, SandboxdSubject
from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.backends.docker.backend import DockerBackend
from sandboxd.backends.docker.workspace import DockerWorkspace
from sandboxd.backends.shared.options import effective
from sandboxd.contract.models import SandboxOptions
from sandboxd.daemon.settings import Settings

KINDS = {"direct": True, "attach": False}
OPS = ("read 1 KiB", "write 1 KiB", "bash true")
_TICK = os.sysconf("SC_CLK_TCK")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def log(message: str) -> None:
    print(f"[channel-ab {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _workspaces(
    res: Resources, direct: bool, count: int
) -> tuple[DockerBackend, list[DockerWorkspace]]:
    settings = Settings(
        namespace=f"{res.namespace}-{'d' if direct else 'a'}",
        pool_size=0,
        direct_channel=direct,
    )
    res.extra_namespaces.append(settings.namespace)
    backend = DockerBackend(settings)
    await backend.start()
    made = []
    for i in range(count):
        name = f"ab{i}"
        options = effective(SandboxOptions(), settings)
        await backend.create(name, options, options)
        workspace = await backend.workspace(name)
        await workspace.ensure_running()
        made.append(workspace)
    return backend, made


def _tool(workspace: DockerWorkspace, label: str) -> Any:
    tool, args = TOOL_OPS[label]

    async def call() -> None:
        result = await workspace.call("tool", {"name": tool, "args": args})
        if result.get("is_error"):
            raise RuntimeError(f"{label}: {result}")

    return call


def _path_pids(res: Resources, workspace: DockerWorkspace) -> dict[str, list[int]]:
    executor, shim = _executor_pid(res.docker, workspace.container.name or "")
    return {
        "daemon (this process)": [os.getpid()],
        "dockerd": _pids_named("dockerd"),
        "containerd-shim": [shim],
        "executor": [executor],
    }


async def _cpu_per_call(res: Resources, workspace: DockerWorkspace, calls: int) -> dict[str, float]:
    pids = _path_pids(res, workspace)
    before = {name: sum(_cpu_ticks(p) for p in group) for name, group in pids.items()}
    call = _tool(workspace, "read 1 KiB")
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    wall = time.perf_counter() - started
    after = {name: sum(_cpu_ticks(p) for p in group) for name, group in pids.items()}
    out = {name: round((after[name] - before[name]) / _TICK / calls * 1e6, 1) for name in pids}
    out["wall µs"] = round(wall / calls * 1e6, 1)
    return out


async def _throughput(workspaces: list[DockerWorkspace], seconds: float) -> float:
    done = 0
    deadline = time.monotonic() + seconds

    async def caller(workspace: DockerWorkspace) -> None:
        nonlocal done
        call = _tool(workspace, "read 1 KiB")
        while time.monotonic() < deadline:
            await call()
            done += 1

    await asyncio.gather(*(caller(w) for w in workspaces))
    return done / seconds


async def measure_grpc(res: Resources, quick: bool) -> dict[str, Any]:
    warmup, n = (10, 60) if quick else (30, 300)
    seconds = 3.0 if quick else 6.0
    daemons = {
        kind: res.start_daemon(
            "--direct-channel", str(direct).lower(), "--pool-size", "0", suffix=f"-g{kind[0]}"
        )
        for kind, direct in KINDS.items()
    }  # fmt: skip
    out: dict[str, Any] = {}
    async with (
        GrpcSandboxFactory(daemons["direct"].target) as direct_factory,
        GrpcSandboxFactory(daemons["attach"].target) as attach_factory,
    ):
        factories = {"direct": direct_factory, "attach": attach_factory}
        sandboxes: dict[str, list[Sandbox]] = {kind: [] for kind in KINDS}
        for kind, factory in factories.items():
            log(f"gRPC: 8 sandboxes on a daemon with {kind}")
            for i in range(8):
                sandbox = await factory.create_sandbox(f"g{i}")
                await SandboxdSubject(sandbox).setup()
                sandboxes[kind].append(sandbox)
        ops = {kind: SandboxdSubject(sandboxes[kind][0]).ops() for kind in KINDS}
        p50: dict[str, dict[str, float]] = {}
        for op in OPS:
            row = await time_interleaved({kind: (ops[kind][op], warmup, n) for kind in KINDS})
            p50[op] = {kind: round(v.p50, 4) for kind, v in row.items()}
            log(f"  gRPC {op:<12} " + "  ".join(f"{k} {v:.3f} ms" for k, v in p50[op].items()))
        out["tools_p50_ms"] = p50
        rates: dict[str, dict[str, list[float]]] = {"file": {}, "bash": {}}
        for _ in range(2):
            for kind in KINDS:
                for name, tool, args, callers in (
                    ("file", *TOOL_OPS["read 1 KiB"], 4),
                    ("bash", *TOOL_OPS["bash true"], 2),
                ):
                    got = await scenarios.throughput(
                        sandboxes[kind], tool=tool, args=args, callers=callers, seconds=seconds
                    )
                    rates[name].setdefault(kind, []).append(got["calls_per_s"])
                    log(f"  gRPC 8 sandboxes {name} calls/s {kind}: {got['calls_per_s']}")
        out["throughput_calls_per_s"] = rates
        for kind in KINDS:
            for sandbox in sandboxes[kind]:
                await sandbox.delete()
    return out


async def measure(res: Resources, quick: bool) -> dict[str, Any]:
    warmup, n = (10, 60) if quick else (30, 300)
    cpu_calls = 500 if quick else 2000
    seconds = 3.0 if quick else 8.0
    out: dict[str, Any] = {
        "meta": {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "quick": quick},
    }
    out["meta"]["loadavg_at_start"] = os.getloadavg()
    backends: list[DockerBackend] = []
    try:
        sets: dict[str, list[DockerWorkspace]] = {}
        for kind, direct in KINDS.items():
            log(f"8 workspaces on {kind}")
            backend, made = await _workspaces(res, direct, 8)
            backends.append(backend)
            assert {w.channel_kind for w in made} == {kind}, [w.channel_kind for w in made]
            sets[kind] = made
            setup = await made[0].call(
                "tool", {"name": "bash", "args": {"command": fx.setup_shell(), "timeout": 300_000}}
            )
            assert not setup.get("is_error"), setup
            for workspace in made:
                await workspace.call(
                    "tool", {"name": "bash", "args": {"command": fx.setup_shell()}}
                )
                for path in (fx.READ_FILE, fx.WRITE_FILE):  # the read guard
                    await workspace.call("tool", {"name": "read", "args": {"file_path": path}})
        p50: dict[str, dict[str, float]] = {}
        for op in OPS:
            row = await time_interleaved(
                {kind: (_tool(sets[kind][0], op), warmup, n) for kind in KINDS}
            )
            p50[op] = {kind: round(s.p50, 4) for kind, s in row.items()}
            log(f"  {op:<12} " + "  ".join(f"{k} {v:.3f} ms" for k, v in p50[op].items()))
        out["p50_ms"] = p50
        cpu: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
        for _ in range(2):
            for kind in KINDS:
                cpu[kind].append(await _cpu_per_call(res, sets[kind][0], cpu_calls))
                log(f"  cpu/call {kind}: {cpu[kind][-1]}")
        out["cpu_us_per_read"] = cpu
        rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for _ in range(2):
            for kind in KINDS:
                rates[kind].append(round(await _throughput(sets[kind], seconds), 1))
                log(f"  8 workspaces, read calls/s {kind}: {rates[kind][-1]}")
        out["read_calls_per_s_8_workspaces"] = rates
    finally:
        for backend in backends:
            await backend.close()
    out["grpc"] = await measure_grpc(res, quick)
    out["meta"]["loadavg_at_end"] = os.getloadavg()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.channel_ab", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few samples")
    args = parser.parse_args(argv)
    res = Resources()
    try:
        results = asyncio.run(measure(res, args.quick))
    finally:
        res.close()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"channel-ab-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(results, indent=2, ensure_ascii=False))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

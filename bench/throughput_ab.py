"""``python -m bench.throughput_ab batch|inline``: one change to the call path, A vs B.

Both sides run in one daemon and one client process, 8 sandboxes each, in
alternating 5 s slices (load from elsewhere on the machine hits both
alike), with ``bench.run``'s throughput loop: 8 sandboxes x 4 callers of
``read`` 1 KiB, or x 2 of ``bash true``. Per slice: calls/s and the CPU per
call of the daemon, this process (the client) and the 8 executors.

- ``batch``: the client's ToolCalls stream as ``runtime_client`` opens it
  (batched requests and answers) vs a stream of one message per call.
- ``inline``: executors that run ``read``/``write``/``edit`` on the reading
  thread (the default) vs on a worker, as before
  (``SANDBOXD_QUICK_INLINE=0`` in the sandbox's environment).

Results go to ``bench/results/<kind>-ab-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import scenarios
from bench.profile import _cpu_ticks, _executor_pid
from bench.resources import Resources
from bench.subjects import TOOL_OPS, SandboxdSubject
from runtime_client import GrpcSandboxFactory, Sandbox
from runtime_client.tool_stream import ToolCallStream
from sandboxd.backends.shared import labels
from sandboxd.contract.models import SandboxOptions

RESULTS_DIR = Path(__file__).resolve().parent / "results"
_TICK = os.sysconf("SC_CLK_TCK")
LOADS = {"read 1 KiB": 4, "bash true": 2}


def log(message: str) -> None:
    print(f"[throughput-ab {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class _OneMessagePerCall(ToolCallStream):
    """The stream as before batches: never asks for batched answers, never sends one."""

    def __init__(self, factory: GrpcSandboxFactory) -> None:
        transport = factory.transport
        super().__init__(lambda metadata: transport.stub.ToolCalls())

    def _next_message(self, mine: Any) -> Any:
        self._batching = False
        return super()._next_message(mine)


async def _factories(target: str, compare: str) -> dict[str, GrpcSandboxFactory]:
    if compare == "inline":
        made = {
            kind: GrpcSandboxFactory(
                target, options=SandboxOptions(env={"SANDBOXD_QUICK_INLINE": flag})
            )
            for kind, flag in (("inline", "1"), ("worker", "0"))
        }
    else:
        made = {"batched": GrpcSandboxFactory(target), "one per call": GrpcSandboxFactory(target)}
        made["one per call"].transport._tool_stream = _OneMessagePerCall(made["one per call"])
    return made


async def _slice(
    res: Resources, daemon_pid: int, sandboxes: list[Sandbox], executors: list[int], op: str
) -> dict[str, float]:
    tool, args = TOOL_OPS[op]
    daemon0 = _cpu_ticks(daemon_pid)
    executors0 = sum(_cpu_ticks(p) for p in executors)
    me0 = os.times()
    got = await scenarios.throughput(
        sandboxes, tool=tool, args=args, callers=LOADS[op], seconds=5.0
    )
    me1 = os.times()
    calls = got["calls"]
    return {
        "calls_per_s": got["calls_per_s"],
        "daemon_us_per_call": round((_cpu_ticks(daemon_pid) - daemon0) / _TICK / calls * 1e6, 1),
        "client_us_per_call": round(
            ((me1.user + me1.system) - (me0.user + me0.system)) / calls * 1e6, 1
        ),
        "executors_us_per_call": round(
            (sum(_cpu_ticks(p) for p in executors) - executors0) / _TICK / calls * 1e6, 1
        ),
    }


async def measure(res: Resources, compare: str, rounds: int) -> dict[str, Any]:
    daemon = res.start_daemon("--pool-size", "0", suffix="-ab")
    factories = await _factories(daemon.target, compare)
    out: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "compare": compare,
            "loadavg_at_start": os.getloadavg(),
        }
    }
    try:
        sandboxes: dict[str, list[Sandbox]] = {}
        executors: dict[str, list[int]] = {}
        for n, (kind, factory) in enumerate(factories.items()):
            log(f"8 sandboxes: {kind}")
            sandboxes[kind] = []
            for i in range(8):
                sandbox = await factory.create_sandbox(f"ab{n}-{i}")
                await SandboxdSubject(sandbox).setup()
                sandboxes[kind].append(sandbox)
            executors[kind] = [
                _executor_pid(res.docker, labels.resource_name(daemon.namespace, s.instance_id))[0]
                for s in sandboxes[kind]
            ]
        slices: dict[str, dict[str, list[dict[str, float]]]] = {op: {} for op in LOADS}
        for _ in range(rounds):
            for op in LOADS:
                for kind in factories:
                    got = await _slice(res, daemon.pid, sandboxes[kind], executors[kind], op)
                    slices[op].setdefault(kind, []).append(got)
                    log(f"  {op:<10} {kind:<13} {got}")
        out["slices"] = slices
        out["median_calls_per_s"] = {
            op: {
                kind: statistics.median(s["calls_per_s"] for s in runs)
                for kind, runs in by_kind.items()
            }
            for op, by_kind in slices.items()
        }
        for kind in factories:
            for sandbox in sandboxes[kind]:
                await sandbox.delete()
    finally:
        for factory in factories.values():
            await factory.aclose()
    out["meta"]["loadavg_at_end"] = os.getloadavg()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.throughput_ab", description=__doc__)
    parser.add_argument("compare", choices=("batch", "inline"))
    parser.add_argument("--rounds", type=int, default=4, help="alternations (default 4)")
    args = parser.parse_args(argv)
    res = Resources()
    try:
        results = asyncio.run(measure(res, args.compare, args.rounds))
    finally:
        res.close()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{args.compare}-ab-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(results["median_calls_per_s"], indent=2, ensure_ascii=False))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

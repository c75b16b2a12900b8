"""Throughput's floor: the throughput run's loops on the in-process tool code.

One worker process per sandbox of the run, each a ToolSession on its own
host folder with the same number of callers (threads) calling the same tool
back to back: what this machine does with the tools' own code and no daemon,
gRPC, channel or container. The workers are started, set up, then released
together, and their calls are summed over the same window, so the row
compares with ``scenarios.throughput`` call for call.

    python -m bench.floor_throughput bash    # one kind (file|bash), printed as JSON
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import fixtures as fx

_REPO = Path(__file__).resolve().parents[1]


def _worker(root: str, tool: str, args_json: str, callers: int, seconds: float) -> None:
    """One sandbox's share: set up, say ready, wait for go, loop, print the count."""
    from sandboxd.executor.tools import ToolSession

    session = ToolSession(f"{root}/workspace", state_dir=f"{root}/state")
    args = json.loads(args_json)
    Path(root, "workspace", fx.READ_FILE).write_text(fx.KIB_TEXT)
    if session.run(tool, args).get("is_error"):
        raise SystemExit(f"{tool} failed in the floor's set-up")
    print("ready", flush=True)
    sys.stdin.readline()
    deadline = time.perf_counter() + seconds
    counts = [0] * callers
    errors = [0] * callers

    def loop(i: int) -> None:
        while time.perf_counter() < deadline:
            if session.run(tool, args).get("is_error"):
                errors[i] += 1
            counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    session.close()
    print(json.dumps({"calls": sum(counts), "errors": sum(errors)}), flush=True)


def _measure(
    *, tool: str, args: dict[str, Any], sandboxes: int, callers: int, seconds: float
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sandboxd-bench-floor-tp-") as tmp:
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.floor_throughput",
                    "--worker",
                    f"{tmp}/{i}",
                    tool,
                    json.dumps(args),
                    str(callers),
                    str(seconds),
                ],
                cwd=_REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(sandboxes)
        ]
        try:
            for worker in workers:
                assert worker.stdout is not None
                if worker.stdout.readline() != "ready\n":
                    raise RuntimeError(f"a floor worker did not start ({tool})")
            start = time.perf_counter()
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            wait = seconds + 60
            outcomes = [json.loads(worker.communicate(timeout=wait)[0]) for worker in workers]
            elapsed = time.perf_counter() - start
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
    calls = sum(o["calls"] for o in outcomes)
    if any(o["errors"] for o in outcomes):
        raise RuntimeError(f"{tool} calls failed in the floor's throughput run")
    return {
        "tool": tool,
        "sandboxes": sandboxes,
        "callers_per_sandbox": callers,
        "calls": calls,
        "seconds": round(elapsed, 3),
        "calls_per_s": round(calls / elapsed, 1),
    }


async def throughput(
    *, tool: str, args: dict[str, Any], sandboxes: int, callers: int, seconds: float
) -> dict[str, Any]:
    """``scenarios.throughput``'s shape, for the in-process floor."""
    return await asyncio.to_thread(
        _measure, tool=tool, args=args, sandboxes=sandboxes, callers=callers, seconds=seconds
    )


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6]))
    else:
        name, arguments, per_sandbox = fx.THROUGHPUT_KINDS[sys.argv[1]]
        outcome = _measure(
            tool=name,
            args=arguments,
            sandboxes=fx.THROUGHPUT_SANDBOXES,
            callers=per_sandbox,
            seconds=5.0,
        )
        print(json.dumps(outcome))

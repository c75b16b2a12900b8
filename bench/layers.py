"""``python -m bench.layers``: where one tool call's time goes, layer by layer.

The same six calls (``bench.subjects.TOOL_OPS``) are timed at five entry
points, each one layer further from the tool code, in alternating slices
(``time_interleaved``) so load from elsewhere hits all alike:

  floor      ``ToolSession.run`` in-process on a host folder: the tool code
  executor   the executor's request loop in-process on the host
             (``executor.main._Server``): a JSON frame in, JSON decode,
             worker-thread hop, dispatch, tool, JSON encode, a frame out
  channel    the daemon's channel to a real container's executor
             (``Workspace.call("tool")``, in this process): + framing on
             the executor's unix socket (or, with SANDBOXD_DIRECT_CHANNEL=0,
             the Docker attach stream: dockerd, containerd shim), the
             container's file system, the sandbox user's identity
  service    ``SandboxService.call_tool`` (in this process): + argument
             validation, lookup of the workspace
  grpc       a ``sandboxd serve`` child process, ``call_tool`` over the
             ``ToolCalls`` stream (and ``unary``: one CallTool RPC each):
             + client, protobuf, gRPC, the daemon's event loop

Each layer's cost is the difference between neighbouring p50s. Results go
to ``bench/results/layers-<timestamp>.json``; everything created is removed.

    python -m bench.layers [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import fixtures as fx
from bench.resources import Resources, interrupt_on_sigterm
from bench.stats import Op, Summary, time_interleaved
from bench.subjects import TOOL_OPS, FloorSubject, SandboxdSubject, _check, _flip
from runtime_client import GrpcSandboxFactory
from sandboxd.executor import wire
from sandboxd.executor.direct import PipeOutlet
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.main import _Server
from sandboxd.service.ports import Workspace
from sandboxd.service.sandbox_service import SandboxService

RESULTS_DIR = Path(__file__).resolve().parent / "results"
LAYERS = ("floor", "executor", "channel", "service", "grpc", "grpc unary")
#: The ops of the layer table (the tree ops are what grep/glob cost, "glob small
#: dir" adds nothing new).
OPS = tuple(op for op in TOOL_OPS if op not in ("glob small dir", fx.PACED_BASH))


def log(message: str) -> None:
    print(f"[layers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _ops(call: Any, flip: Any = None) -> dict[str, Op]:
    """op label -> Op from ``call(tool, args)`` (a coroutine function).

    Entry points on one workspace share ``flip`` (the edit's alternation).
    """
    out: dict[str, Op] = {}
    flip = flip or _flip()
    for label, (tool, args) in TOOL_OPS.items():
        if label not in OPS:
            continue
        if tool == "edit":

            async def edit(label: str = label, flip: Any = flip) -> None:
                _check(label, await call("edit", flip()))

            out[label] = edit
        else:

            async def op(label: str = label, tool: str = tool, args: Any = args) -> None:
                _check(label, await call(tool, args))

            out[label] = op
    return out


class HostExecutor:
    """The executor's request loop in this process, on a host folder."""

    def __init__(self, root: Path) -> None:
        read_end, write_end = os.pipe()
        self._replies = os.fdopen(read_end, "rb")
        self.executor = Executor(str(root / "workspace"), state_dir=str(root / "state"))
        self.server = _Server(self.executor, PipeOutlet(os.fdopen(write_end, "wb")))
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def call_sync(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            request_id = next(self._ids)
            self.server.accept(
                wire.Frame(
                    wire.encode(
                        {"id": request_id, "op": "tool", "args": {"name": tool, "args": args}}
                    )
                )
            )
            reply = wire.decode(self._replies.readline())
        if reply.get("id") != request_id or "ok" not in reply:
            raise RuntimeError(f"executor: {reply}")
        result: dict[str, Any] = reply["ok"]
        return result

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return self.call_sync(tool, args)

    def close(self) -> None:
        self.executor.close()
        self.server.pool.shutdown(wait=False)


async def measure(res: Resources, quick: bool) -> dict[str, Any]:
    warmup, n = (4, 30) if quick else (20, 200)
    slow = (2, 8) if quick else (5, 50)
    out: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "loadavg_at_start": os.getloadavg(),
            "quick": quick,
            "bash_ahead": os.environ.get("SANDBOXD_BASH_AHEAD", "1"),
        }
    }
    log("floor and host executor")
    floor = FloorSubject(res.tmp / "floor")
    await floor.setup()
    host = HostExecutor(res.tmp / "host")
    _check("setup", host.call_sync("bash", {"command": fx.setup_shell(), "timeout": 300_000}))
    for path in (fx.READ_FILE, fx.WRITE_FILE, fx.EDIT_FILE):
        _check("setup read", host.call_sync("read", {"file_path": path}))

    log("in-process docker backend + service")
    from sandboxd.backends.docker.backend import DockerBackend
    from sandboxd.daemon.settings import Settings

    settings = Settings(namespace=res.namespace + "-in", pool_size=0)
    backend = DockerBackend(settings)
    await backend.start()
    service = SandboxService(backend, settings)
    res.extra_namespaces.append(settings.namespace)
    daemon = res.start_daemon()
    try:
        await service.create_sandbox("layers")
        workspace: Workspace = await backend.workspace("layers")

        async def channel_call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            return await workspace.call("tool", {"name": tool, "args": args})

        async def service_call(tool: str, args: dict[str, Any]) -> Any:
            return await service.call_tool("layers", tool, args)

        _check(
            "setup", await service_call("bash", {"command": fx.setup_shell(), "timeout": 300_000})
        )
        for path in (fx.READ_FILE, fx.WRITE_FILE, fx.EDIT_FILE):
            _check("setup read", await service_call("read", {"file_path": path}))
        async with (
            GrpcSandboxFactory(daemon.target) as factory,
            GrpcSandboxFactory(daemon.target) as unary_factory,
        ):
            sandbox = await factory.create_sandbox("layers")
            await SandboxdSubject(sandbox).setup()
            unary_factory.transport._tool_stream_supported = False
            unary = await unary_factory.create_sandbox("layers")
            in_process, daemon_side = _flip(), _flip()
            subjects = {
                "floor": floor.ops(),
                "executor": _ops(host.call),
                "channel": _ops(channel_call, in_process),
                "service": _ops(service_call, in_process),
                "grpc": _ops(sandbox.call_tool, daemon_side),
                "grpc unary": _ops(unary.call_tool, daemon_side),
            }
            table: dict[str, dict[str, Summary]] = {}
            for op in OPS:
                counts = slow if op.startswith(("grep", "glob")) else (warmup, n)
                table[op] = await time_interleaved(
                    {layer: (subjects[layer][op], *counts) for layer in LAYERS}
                )
                log(f"  {op:<14} " + "  ".join(f"{k} {v.p50:.3f}" for k, v in table[op].items()))
            await sandbox.delete()
    finally:
        floor.close()
        host.close()
        await backend.close()
    out["p50_ms"] = {op: {k: round(v.p50, 4) for k, v in row.items()} for op, row in table.items()}
    out["summaries"] = {op: {k: v.to_json() for k, v in row.items()} for op, row in table.items()}
    out["meta"]["loadavg_at_end"] = os.getloadavg()
    return out


#: (label of the layer's own cost, the layer, the layer below it).
DELTAS = (
    ("tool code (floor)", "floor", None),
    ("executor loop: JSON + thread hop + dispatch", "executor", "floor"),
    ("executor channel + container (socket or attach, fs, uid)", "channel", "executor"),
    ("service: validation + lookup", "service", "channel"),
    ("gRPC ToolCalls stream + client + protobuf", "grpc", "service"),
)


def render(result: dict[str, Any]) -> str:
    p50 = result["p50_ms"]
    ops = list(p50)
    width = max(len(d[0]) for d in DELTAS) + 2
    load = result["meta"]["loadavg_at_start"][0], result["meta"]["loadavg_at_end"][0]
    lines = [
        "Per-layer cost of one tool call (ms, p50 differences; "
        f"load {load[0]:.1f} -> {load[1]:.1f})",
        "layer".ljust(width) + "".join(op.rjust(15) for op in ops),
    ]
    for label, layer, below in DELTAS:
        cells = []
        for op in ops:
            value = p50[op][layer] - (p50[op][below] if below else 0.0)
            cells.append(f"{value:15.3f}")
        lines.append(label.ljust(width) + "".join(cells))
    lines.append("total (grpc)".ljust(width) + "".join(f"{p50[op]['grpc']:15.3f}" for op in ops))
    lines.append(
        "grpc unary (one RPC a call)".ljust(width)
        + "".join(f"{p50[op]['grpc unary']:15.3f}" for op in ops)
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.layers", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few samples")
    parser.add_argument("--tag", default="", help="a word for the result file's name")
    args = parser.parse_args(argv)
    interrupt_on_sigterm()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    res = Resources()
    try:
        result = asyncio.run(measure(res, args.quick))
    except KeyboardInterrupt:
        return 130
    finally:
        res.close()
    print(render(result))
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"layers-{stamp}{'-' + args.tag if args.tag else ''}.json"
    import json

    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m bench.bytecode_ab``: executor start, shipped bytecode vs sources.

One process, two in-process Docker backends that differ only in
``ship_bytecode`` (SANDBOXD_SHIP_BYTECODE), no warm pool, so every create
starts a container and an executor. Rounds alternate which backend goes
first. For each cold create: the time from ``create`` to the first command's
answer, and the container's CPU until then (cgroup, as ``docker stats``
reads it: the bootstrap, the executor's imports, its hello and the command).

Results go to ``bench/results/bytecode-ab-<timestamp>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.resources import Resources
from bench.stats import summarize
from sandboxd.backends.docker.backend import DockerBackend
from sandboxd.backends.shared.options import effective
from sandboxd.contract.models import SandboxOptions
from sandboxd.daemon.settings import Settings

KINDS = {"shipped": True, "sources": False}
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def log(message: str) -> None:
    print(f"[bytecode-ab {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _cold_create(
    backend: DockerBackend, settings: Settings, name: str
) -> tuple[float, float]:
    """(seconds from create to the first command's answer, container CPU seconds)."""
    options = effective(SandboxOptions(), settings)
    started = time.perf_counter()
    await backend.create(name, options, options)
    workspace = await backend.workspace(name)
    answer = await workspace.call("exec", {"argv": ["true"]})
    elapsed = time.perf_counter() - started
    if answer.get("exit_code") != 0:
        raise RuntimeError(f"the first command failed: {answer}")
    stats = await asyncio.to_thread(workspace.container.stats, stream=False, one_shot=True)
    cpu_ns = int(stats["cpu_stats"]["cpu_usage"]["total_usage"])
    await backend.delete(name)
    return elapsed, cpu_ns / 1e9


async def measure(res: Resources, rounds: int) -> dict[str, Any]:
    backends: dict[str, tuple[DockerBackend, Settings]] = {}
    for kind, ship in KINDS.items():
        settings = Settings(namespace=f"{res.namespace}-{kind}", pool_size=0, ship_bytecode=ship)
        res.extra_namespaces.append(settings.namespace)
        backend = DockerBackend(settings)
        await backend.start()
        backends[kind] = (backend, settings)
    try:
        wall: dict[str, list[float]] = {kind: [] for kind in KINDS}
        cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for backend, settings in backends.values():  # warm-up, not counted
            await _cold_create(backend, settings, "warm")
        for i in range(rounds):
            order = list(KINDS) if i % 2 == 0 else list(reversed(KINDS))
            for kind in order:
                backend, settings = backends[kind]
                seconds, cpu_s = await _cold_create(backend, settings, f"ab{i}")
                wall[kind].append(seconds)
                cpu[kind].append(cpu_s)
            log(
                f"round {i}: "
                + ", ".join(
                    f"{k} {wall[k][-1] * 1000:.0f} ms / {cpu[k][-1] * 1000:.0f} ms CPU"
                    for k in KINDS
                )
            )
        return {
            kind: {
                "create_to_first_command_ms": dataclasses.asdict(summarize(wall[kind])),
                "container_cpu_ms": dataclasses.asdict(summarize(cpu[kind])),
            }
            for kind in KINDS
        }
    finally:
        for backend, _ in backends.values():
            await backend.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bytecode_ab", description=__doc__)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args(argv)
    res = Resources()
    try:
        results = asyncio.run(measure(res, args.rounds))
    finally:
        res.close()
    for kind, row in results.items():
        wall, cpu = row["create_to_first_command_ms"], row["container_cpu_ms"]
        print(
            f"{kind:8s} create -> first command p50 {wall['p50']:.1f} ms (p95 {wall['p95']:.1f}),"
            f" container CPU p50 {cpu['p50']:.1f} ms"
        )
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"bytecode-ab-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Named snapshots of a 100 MB workspace (issue 28 item 4): CreateSnapshot and
RestoreSnapshot p50, timed at the client (the whole call, the restore's
container restart included).

    python -m bench.snapshots         # this section alone (~30 s)
    python -m bench.run               # the full bench includes it (in bench.transfer,
                                      # on the transfer's 10,000-file / 100 MB tree)
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from runtime_client import GrpcSandboxFactory, Sandbox


async def measure_on(box: Sandbox, factory: GrpcSandboxFactory, rounds: int = 5) -> dict[str, Any]:
    """Snapshot ``box`` and restore it, ``rounds`` times; each snapshot deleted after."""
    taken: list[float] = []
    restored: list[float] = []
    methods: set[str] = set()
    for n in range(rounds):
        name = f"bench-snap-{n}"
        started = time.perf_counter()
        snapshot = await box.snapshot(name)
        taken.append((time.perf_counter() - started) * 1000)
        # A change the restore undoes, so it has something to do besides copying.
        await box.write_file("changed.txt", f"round {n}\n")
        started = time.perf_counter()
        result = await box.restore(name)
        restored.append((time.perf_counter() - started) * 1000)
        methods |= {snapshot.method, result.method}
        await factory.transport.delete_snapshot(name)
    return {
        "snapshot_100mb_ms_p50": statistics.median(taken),
        "restore_100mb_ms_p50": statistics.median(restored),
        "snapshot_ms": taken,
        "restore_ms": restored,
        "snapshot_bytes": snapshot.size_bytes,
        "snapshot_method": ",".join(sorted(methods)),
    }


def targets(found: dict[str, Any]) -> list[tuple[str, float, float, str, bool]]:
    """(name, value, limit, unit, higher_is_better)."""
    return [
        ("snapshot of a 100 MB workspace p50 <= 1 s", found["snapshot_100mb_ms_p50"], 1000.0,
         "ms", False),
        ("restore of a 100 MB workspace p50 <= 1 s", found["restore_100mb_ms_p50"], 1000.0,
         "ms", False),
    ]  # fmt: skip


def render(found: dict[str, Any]) -> str:
    return (
        f"  snapshot 100 MB p50 {found['snapshot_100mb_ms_p50']:.0f} ms, restore p50 "
        f"{found['restore_100mb_ms_p50']:.0f} ms ({found['snapshot_method']}, "
        f"{found['snapshot_bytes'] / 1e6:.0f} MB)"
    )


def main() -> int:
    from bench.resources import Resources, interrupt_on_sigterm
    from bench.transfer import make_tree

    interrupt_on_sigterm()
    res = Resources()

    async def run() -> dict[str, Any]:
        daemon = res.start_daemon()
        tree = Path(res.tmp) / "tree"
        await asyncio.to_thread(make_tree, tree)
        async with GrpcSandboxFactory(daemon.target) as factory:
            box = await factory.create_sandbox("snapshots")
            await box.upload_tree(tree, "tree")
            try:
                return await measure_on(box, factory)
            finally:
                await box.delete()

    try:
        found = asyncio.run(run())
    finally:
        res.close()
    for name, value, limit, unit, _higher in targets(found):
        print(f"{'PASS' if value <= limit else 'MISS'}  {name}: {value:.4g} <= {limit:.4g} {unit}")
    print(render(found))
    found["loadavg_at_end"] = os.getloadavg()
    print(f"(loadavg {found['loadavg_at_end'][0]:.2f})")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = Path(__file__).resolve().parent / "results" / f"snapshots-{stamp}.json"
    path.write_text(json.dumps(found, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

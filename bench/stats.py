"""Latency samples -> percentiles, and the timing loops that collect them."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import Any

Op = Callable[[], Awaitable[Any]]


@dataclasses.dataclass(frozen=True)
class Summary:
    """Milliseconds, over ``n`` measured samples (warm-up excluded)."""

    n: int
    p50: float
    p95: float
    p99: float
    mean: float
    min: float
    max: float

    def to_json(self) -> dict[str, float]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in vars(self).items()}


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def summarize(seconds: list[float]) -> Summary:
    ms = sorted(s * 1000.0 for s in seconds)
    return Summary(
        n=len(ms),
        p50=percentile(ms, 0.50),
        p95=percentile(ms, 0.95),
        p99=percentile(ms, 0.99),
        mean=sum(ms) / len(ms) if ms else float("nan"),
        min=ms[0] if ms else float("nan"),
        max=ms[-1] if ms else float("nan"),
    )


async def samples(op: Op, n: int, *, pause: float = 0.0) -> list[float]:
    """``n`` timed calls of ``op``, one at a time (seconds), each after ``pause`` idle."""
    out = []
    for _ in range(n):
        if pause:
            await asyncio.sleep(pause)
        start = time.perf_counter()
        await op()
        out.append(time.perf_counter() - start)
    return out


async def time_op(op: Op, *, warmup: int, n: int, pause: float = 0.0) -> Summary:
    """Run ``op`` ``warmup`` times untimed, then ``n`` times, one at a time."""
    for _ in range(warmup):
        await op()
    return summarize(await samples(op, n, pause=pause))


async def time_interleaved(
    ops: dict[str, tuple[Op, int, int]], *, rounds: int = 10, pause: float = 0.0
) -> dict[str, Summary]:
    """Like ``time_op`` for several subjects ``name -> (op, warmup, n)``, taken in
    ``rounds`` alternating slices, so a burst of load from elsewhere on the
    machine hits every subject alike and their ratios stay fair."""
    for op, warmup, _ in ops.values():
        for _ in range(warmup):
            await op()
    taken: dict[str, list[float]] = {name: [] for name in ops}
    for i in range(rounds):
        for name, (op, _, n) in ops.items():
            share = n * (i + 1) // rounds - n * i // rounds
            taken[name] += await samples(op, share, pause=pause)
    return {name: summarize(values) for name, values in taken.items()}

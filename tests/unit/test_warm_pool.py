"""The warm pool's demand-following, with fake workspaces (no engine)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from sandboxd.backends.shared.pool import WarmPool

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class FakeEngine:
    """Starts numbered 'workspaces' after a delay; counts starts running at once."""

    def __init__(self, start_s: float = 0.02, fail: bool = False) -> None:
        self.start_s = start_s
        self.fail = fail
        self.numbers = itertools.count(1)
        self.running = 0
        self.most_at_once = 0
        self.discarded: list[int] = []

    async def make(self) -> int:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await asyncio.sleep(self.start_s)
            if self.fail:
                raise RuntimeError("engine down")
            return next(self.numbers)
        finally:
            self.running -= 1

    async def discard(self, workspace: int) -> None:
        self.discarded.append(workspace)


def _pool(engine: FakeEngine, floor: int, **kwargs: object) -> WarmPool[int]:
    return WarmPool(
        floor,
        make=engine.make,
        discard=engine.discard,
        usable=lambda workspace: workspace > 0,
        **kwargs,  # type: ignore[arg-type]
    )


async def _until(condition: object, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


async def test_fills_to_the_floor_with_parallel_starts() -> None:
    engine = FakeEngine(start_s=0.05)
    pool = _pool(engine, 4, ceiling=8, parallel=2)
    pool.start()
    await _until(lambda: pool.ready == 4)
    assert engine.most_at_once == 2  # refills overlap, but no more than `parallel`
    assert pool.size == 4 and pool.made == 4
    await pool.close()
    assert sorted(engine.discarded) == [1, 2, 3, 4]


async def test_a_burst_raises_the_target_so_the_next_burst_is_served_warm() -> None:
    engine = FakeEngine()
    pool = _pool(engine, 2, ceiling=6, parallel=3, quiet_s=0.01)
    pool.start()
    await _until(lambda: pool.ready == 2)
    burst = [pool.take() for _ in range(5)]
    assert [w is not None for w in burst] == [True, True, False, False, False]
    assert pool.size == 5  # five claims in the window
    await _until(lambda: pool.ready == 5)
    assert all(pool.take() is not None for _ in range(5))
    assert pool.served == 7
    await pool.close()


async def test_the_target_never_passes_the_ceiling() -> None:
    engine = FakeEngine()
    pool = _pool(engine, 1, ceiling=3)
    pool.start()
    await _until(lambda: pool.ready == 1)
    for _ in range(10):
        pool.take()
    assert pool.size == 3
    await _until(lambda: pool.ready == 3)
    await asyncio.sleep(0.1)
    assert pool.ready == 3 and engine.running == 0
    await pool.close()


async def test_demand_decays_back_to_the_floor_and_surplus_is_removed() -> None:
    engine = FakeEngine()
    now = [0.0]
    pool = _pool(engine, 1, ceiling=4, window_s=0.2, quiet_s=0.0, clock=lambda: now[0])
    pool.start()
    await _until(lambda: pool.ready == 1)
    for _ in range(4):
        pool.take()
    await _until(lambda: pool.ready == 4)
    now[0] += 1.0  # the burst leaves the window
    # Surplus leaves the pool at once; its removal runs in the background.
    await _until(lambda: pool.ready == 1 and len(engine.discarded) == 3)
    assert pool.size == 1
    await pool.close()


async def test_a_claim_burst_is_not_competing_with_refills() -> None:
    engine = FakeEngine()
    pool = _pool(engine, 3, ceiling=3, quiet_s=1.0)
    pool.start()
    await _until(lambda: pool.ready == 3)
    pool.take()
    pool.take()
    await asyncio.sleep(0.05)
    assert engine.running == 0  # still within the quiet period after the last claim
    await _until(lambda: pool.ready == 3)
    await pool.close()


async def test_unusable_workspaces_are_discarded_not_served() -> None:
    engine = FakeEngine()
    pool = _pool(engine, 2)
    pool._ready.extend([-1, 7])  # -1: its channel died while it waited
    assert pool.take() == 7
    await asyncio.sleep(0.01)
    assert engine.discarded == [-1]
    await pool.close()


async def test_a_failing_engine_is_retried_after_a_delay_not_in_a_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sandboxd.backends.shared.pool.RETRY_DELAY_S", 0.2)
    engine = FakeEngine(fail=True, start_s=0.0)
    calls = 0
    make = engine.make

    async def counting_make() -> int:
        nonlocal calls
        calls += 1
        return await make()

    pool = WarmPool(2, counting_make, engine.discard, lambda w: True, parallel=2)
    pool.start()
    await asyncio.sleep(0.1)
    assert calls == 2  # one round of parallel starts, then the delay
    engine.fail = False
    await _until(lambda: pool.ready == 2)
    await pool.close()


async def test_close_removes_workspaces_still_starting() -> None:
    engine = FakeEngine(start_s=0.1)
    pool = _pool(engine, 2, parallel=2)
    pool.start()
    await asyncio.sleep(0.02)
    assert engine.running == 2
    await pool.close()
    assert sorted(engine.discarded) == [1, 2] and pool.ready == 0


async def test_a_zero_floor_is_off() -> None:
    engine = FakeEngine()
    pool = _pool(engine, 0, ceiling=8)
    pool.start()
    assert pool.take() is None and pool.size == 0
    await asyncio.sleep(0.05)
    assert engine.running == 0 and pool.made == 0
    await pool.close()


async def test_close_discards_the_ready_ones_at_once() -> None:
    # One by one, a full pool on a loaded engine outlasted a stop's grace.
    engine = FakeEngine()
    pool = _pool(engine, 4)
    pool.start()
    await _until(lambda: pool.ready == 4)
    discarding = 0
    most = 0

    async def slow_discard(workspace: int) -> None:
        nonlocal discarding, most
        discarding += 1
        most = max(most, discarding)
        await asyncio.sleep(0.05)
        discarding -= 1
        engine.discarded.append(workspace)

    pool._discard = slow_discard  # type: ignore[method-assign]
    await pool.close()
    assert sorted(engine.discarded) == [1, 2, 3, 4]
    assert most == 4

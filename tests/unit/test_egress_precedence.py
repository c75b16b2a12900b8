"""Tool calls before relayed bytes (egress.precedence): who waits, and for how long at most."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sandboxd.backends.local.backend import LocalBackend
from sandboxd.contract.models import SandboxOptions
from sandboxd.daemon.settings import Settings
from sandboxd.egress.precedence import Precedence
from sandboxd.service.sandbox_service import SandboxService


class Slow(Precedence):
    """Bounds long enough that a test can tell waiting from not."""

    HOLD_S = 5.0
    AFTER_S = 0.0
    MAX_WAIT_S = 5.0


def _goes_at_once(precedence: Precedence, instance_id: str) -> bool:
    """Whether a chunk goes on without waiting at all (not one suspension)."""
    waiting = precedence.yield_to_calls(instance_id)
    try:
        waiting.send(None)
    except StopIteration:
        return True
    waiting.close()
    return False


async def _waited(precedence: Precedence, instance_id: str) -> float:
    started = time.monotonic()
    await precedence.yield_to_calls(instance_id)
    return time.monotonic() - started


@pytest.mark.anyio
async def test_without_calls_a_chunk_never_waits() -> None:
    precedence = Slow()
    assert _goes_at_once(precedence, "a")
    assert not precedence.holds("a")


@pytest.mark.anyio
async def test_a_chunk_waits_for_another_sandboxs_call_until_it_ends() -> None:
    precedence = Slow()
    with precedence.call("caller"):
        chunk = asyncio.create_task(precedence.yield_to_calls("downloader"))
        await asyncio.sleep(0.1)
        assert not chunk.done()  # held while the call runs
        assert precedence.holds("downloader")
    async with asyncio.timeout(1):
        await chunk  # the call ended: the chunk goes
    assert not precedence.holds("downloader")


@pytest.mark.anyio
async def test_a_sandboxs_own_call_never_holds_its_relays() -> None:
    precedence = Slow()
    with precedence.call("box"):  # e.g. a bash running curl through the proxy
        assert _goes_at_once(precedence, "box")
        assert not precedence.holds("box")
        assert not _goes_at_once(precedence, "other")


@pytest.mark.anyio
async def test_relays_keep_still_a_moment_after_a_call_ends() -> None:
    precedence = Precedence()
    with precedence.call("caller"):
        pass
    waited = await _waited(precedence, "downloader")
    assert precedence.AFTER_S * 0.9 <= waited < 1.0
    assert _goes_at_once(precedence, "downloader")


@pytest.mark.anyio
async def test_an_old_call_no_longer_holds_relays() -> None:
    class Short(Slow):
        HOLD_S = 0.05

    precedence = Short()
    with precedence.call("caller"):  # a long bash
        assert not _goes_at_once(precedence, "downloader")
        await asyncio.sleep(0.06)
        assert _goes_at_once(precedence, "downloader")
        with precedence.call("caller"):  # the same sandbox's next call: young again
            assert not _goes_at_once(precedence, "downloader")


@pytest.mark.anyio
async def test_one_chunk_waits_at_most_max_wait_however_many_calls_come() -> None:
    class Bounded(Slow):
        MAX_WAIT_S = 0.1

    precedence = Bounded()
    stop = asyncio.Event()

    async def back_to_back(instance_id: str) -> None:
        while not stop.is_set():
            with precedence.call(instance_id):
                await asyncio.sleep(0.01)

    callers = [asyncio.create_task(back_to_back(f"caller-{i}")) for i in range(3)]
    try:
        await asyncio.sleep(0.02)
        waited = await _waited(precedence, "downloader")
        assert 0.09 <= waited < 1.0
    finally:
        stop.set()
        await asyncio.gather(*callers)


def test_the_service_marks_tool_calls_for_the_relays(tmp_path: Path) -> None:
    settings = Settings.from_arguments(backend="local", local_root=tmp_path / "root")
    backend = LocalBackend(settings)
    service = SandboxService(backend, settings)
    precedence = service.gateways.precedence

    async def run() -> None:
        await backend.start()
        try:
            await service.create_sandbox("sb", SandboxOptions())
            call = asyncio.create_task(service.call_tool("sb", "bash", {"command": "sleep 1"}))
            for _ in range(500):  # until the call reaches the sandbox
                if precedence.holds("other"):
                    break
                await asyncio.sleep(0.01)
            assert precedence.holds("other")
            assert not precedence.holds("sb")  # its own call: never
            result = await call
            assert not result.is_error
            await asyncio.sleep(Precedence.AFTER_S)
            assert not precedence.holds("other")
            await service.delete_sandbox("sb")
        finally:
            await backend.close()

    asyncio.run(run())


def test_docs_state_the_bounds_the_code_has() -> None:
    text = " ".join((Path(__file__).parents[2] / "docs" / "network.md").read_text().split())
    ms = {
        name: round(getattr(Precedence, name) * 1000)
        for name in ("HOLD_S", "AFTER_S", "MAX_WAIT_S")
    }
    assert f"for {ms['AFTER_S']} ms after it" in text
    assert f"only in its first {ms['HOLD_S']} ms" in text
    assert f"one chunk waits at most {ms['MAX_WAIT_S']} ms" in text

"""A planted ``.gitignore`` cannot wedge the sandbox (issue 23, item 7).

The attack: one ``.gitignore`` line of thirty ``*a`` then ``b`` and a file
name of sixty ``a``s. ``glob **/*`` ran past 60 s (the pattern's regex
backtracked exponentially, holding the executor's GIL), read, exec and grep
on the same sandbox timed out with it, and DownloadTree with gitignore on
gave no answer in 300 s. Now the matcher is linear (``globpat``) and walks
give the GIL away every 2 ms (``gilpause``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from runtime_client import Sandbox
from sandboxd.contract.models import TreeDownloadDone

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(300)]

EVIL = "*a" * 30 + "b"
NAME = "a" * 60
#: Far above what a call takes here, far below the wedge (which never ended).
PATIENCE_S = 30.0


async def _plant(box: Sandbox) -> None:
    await box.write_file(".gitignore", EVIL + "\n")
    await box.write_file(f"deep/er/{NAME}", "x", create_parents=True)
    await box.write_file("probe.txt", "probe\n")


async def test_a_planted_pattern_answers_and_the_other_calls_go_on(box: Sandbox) -> None:
    await _plant(box)
    found = asyncio.ensure_future(box.glob("**/*"))
    try:
        # Calls of the same sandbox while the glob runs.
        read = await asyncio.wait_for(box.read("probe.txt"), PATIENCE_S)
        assert "probe" in read.text, read.text
        ran = await asyncio.wait_for(box.exec(["echo", "ok"]), PATIENCE_S)
        assert ran.stdout == b"ok\n", ran
        grep = await asyncio.wait_for(box.grep("probe"), PATIENCE_S)
        assert "probe.txt" in grep.text, grep.text
        result = await asyncio.wait_for(found, PATIENCE_S)
    finally:
        found.cancel()
    assert f"deep/er/{NAME}" in result.text, result.text
    chunks = box.download_tree_iter(".", gitignore=True)
    done = await asyncio.wait_for(_last(chunks), PATIENCE_S)
    assert isinstance(done, TreeDownloadDone) and done.entries >= 4, done


async def _last(chunks: AsyncIterator[bytes | TreeDownloadDone]) -> object:
    last: object = None
    async for item in chunks:
        last = item
    return last


#: A .gitignore whose lines alternate kinds (so no two share a regex) and a
#: tree of many files: a walk of seconds, all of it Python and regex calls.
RULES = 2_000
FILES = 500


async def test_a_long_walk_leaves_the_gil_to_quick_calls(box: Sandbox) -> None:
    """A glob whose every entry is checked against thousands of rules is pure
    Python for seconds: a quick read beside it must not wait for its end."""
    rules = "".join(f"nothing-{i}-*.tmp\n!kept-{i}-*.tmp\n" for i in range(RULES // 2))
    await box.write_file(".gitignore", rules)
    await box.bash(f"mkdir -p many && cd many && seq -f 'f%g.txt' 1 {FILES} | xargs touch")
    await box.write_file("probe.txt", "probe\n")
    started = time.monotonic()
    walk = asyncio.ensure_future(box.glob("**/*.txt", head_limit=1))
    slowest = 0.0
    reads = 0
    try:
        while not walk.done():
            began = time.monotonic()
            await box.read("probe.txt")
            slowest = max(slowest, time.monotonic() - began)
            reads += 1
        result = await walk
    finally:
        walk.cancel()
    took = time.monotonic() - started
    assert "Showing 1 of" in result.text, result.text
    # The walk took seconds; each read beside it a small part of that.
    assert reads >= 3, (reads, took)
    assert slowest < max(0.5, took / 4), (slowest, took, reads)

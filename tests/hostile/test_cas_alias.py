"""Compare-and-swap through an alias, over the API (issue 23, item 8): two
clients write with the same ``expected_sha256``, one naming the file, the
other an alias through a symlinked folder; exactly one may win each round.
The executor-level test (both verbs, both kinds of alias) is
tests/unit/test_cas_alias.py."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from runtime_client import Conflict, Sandbox

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]

ROUNDS = 15
SIZE = 900 * 1024  # under the test daemon's 1 MiB payload limit


async def _wins(box: Sandbox, path: str, data: bytes, expected: str) -> bool:
    try:
        await box.write_file(path, data, expected_sha256=expected)
    except Conflict:
        return False
    return True


async def test_one_writer_wins_each_round_through_a_symlinked_folder(box: Sandbox) -> None:
    await box.bash("mkdir -p real && ln -s real alias && head -c 900K /dev/zero > real/f")
    current = b"\0" * SIZE
    doubles = 0
    for round_number in range(ROUNDS):
        expected = hashlib.sha256(current).hexdigest()
        # Each round's content differs: a rewrite of the same bytes would
        # let the second writer's check pass honestly.
        wins = await asyncio.gather(
            *(
                _wins(
                    box, path, b"%s%d" % (path[:1].encode(), round_number) * (SIZE // 4), expected
                )
                for path in ("real/f", "alias/f")
            )
        )
        assert any(wins), f"round {round_number}: nobody won"
        doubles += all(wins)
        current = (await box.read_file("real/f")).data
    assert doubles == 0, f"both writers won in {doubles} of {ROUNDS} rounds"

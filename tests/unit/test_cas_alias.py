"""Compare-and-swap holds per file, whatever path names it (issue 23, item 8).

The attack: two writers with the same ``expected_sha256``, one naming the
file, the other an alias of it through a symlink; both won in 6 of 15
rounds, because the executor's per-path lock was keyed by the path string.
Exactly one may win each round, whichever verb and alias it uses.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sandboxd.contract.errors import Conflict
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.tools.locks import PathLocks

pytestmark = pytest.mark.unit

ROUNDS = 15
#: Large enough that hashing it takes a while (with the GIL released), so
#: both writers are inside their check at the same time when nothing stops them.
SIZE = 4 << 20


@pytest.fixture
def ex(tmp_path: Path) -> Executor:
    work = tmp_path / "w"
    (work / "real").mkdir(parents=True)
    (work / "real" / "file").write_bytes(b"\0" * SIZE)
    (work / "link").symlink_to("real/file")
    (work / "alias").symlink_to("real")
    executor = Executor(str(work), state_dir=str(tmp_path / "state"))
    yield executor
    executor.close()


def _write(ex: Executor, path: str, expected: str, data: bytes) -> None:
    ex.handle("write_file", {"path": path, "data": data, "expected_sha256": expected})


def _upload(ex: Executor, path: str, expected: str, data: bytes) -> None:
    session = f"s-{path}-{threading.get_ident()}"
    ex.handle("upload_begin", {"session": session, "path": path, "expected_sha256": expected})
    ex.handle("upload_chunk", {"session": session, "offset": 0, "data": data})
    ex.handle("upload_commit", {"session": session, "size": len(data)})


Writer = Callable[[Executor, str, str, bytes], None]


def _attempt(
    ex: Executor,
    writer: Writer,
    path: str,
    expected: str,
    data: bytes,
    start: threading.Barrier,
    wins: list[str],
) -> None:
    start.wait()
    try:
        writer(ex, path, expected, data)
        wins.append(path)
    except Conflict:
        pass


@pytest.mark.parametrize("alias", ["link", "alias/file"])
@pytest.mark.parametrize(("first", "second"), [(_write, _write), (_upload, _write)])
def test_one_winner_per_round_through_any_alias(
    ex: Executor, tmp_path: Path, alias: str, first: Writer, second: Writer
) -> None:
    file = tmp_path / "w" / "real" / "file"
    doubles = 0
    for round_number in range(ROUNDS):
        current = file.read_bytes()
        expected = hashlib.sha256(current).hexdigest()
        start = threading.Barrier(2)
        wins: list[str] = []
        payloads = (b"A%d" % round_number * SIZE, b"B%d" % round_number * SIZE)
        threads = [
            threading.Thread(
                target=_attempt,
                args=(ex, writer, path, expected, data[:SIZE], start, wins),
            )
            for writer, path, data in (
                (first, "real/file", payloads[0]),
                (second, alias, payloads[1]),
            )
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert wins, f"round {round_number}: nobody won"
        doubles += len(wins) > 1
    assert doubles == 0, f"both writers won in {doubles} of {ROUNDS} rounds"
    assert os.path.islink(tmp_path / "w" / "link"), "the link was replaced, not written through"


def test_a_link_changed_while_waiting_takes_the_new_files_lock(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    link = tmp_path / "link"
    link.symlink_to("a")
    locks = PathLocks()
    entered = threading.Event()
    with locks.held_file(str(tmp_path / "a")) as held:
        assert held == str(tmp_path / "a")

        def other() -> None:
            with locks.held_file(str(link)) as target:
                assert target == str(tmp_path / "b")
                entered.set()

        thread = threading.Thread(target=other)
        thread.start()
        while locks._locks[str(tmp_path / "a")][1] < 2:  # the other waits on a's lock
            time.sleep(0.001)
        # The link now names b, whose lock is free: taken once a's is let go.
        link.unlink()
        link.symlink_to("b")
        assert not entered.wait(0.2)
    thread.join(5)
    assert entered.is_set()

"""Idempotent tool calls: a retry with the same tool_call_id never runs twice."""

from __future__ import annotations

import threading
import time

import pytest

from sandboxd.contract.errors import InvalidArgument
from sandboxd.executor.records import CallRecords

pytestmark = pytest.mark.unit


def test_a_completed_call_is_replayed_not_rerun() -> None:
    records = CallRecords()
    runs: list[int] = []

    def call() -> dict[str, object]:
        runs.append(1)
        return {"text": "done", "is_error": False, "fields": {}}

    first = records.run("c1", "bash", {"command": "x"}, call)
    again = records.run("c1", "bash", {"command": "x"}, call)
    assert runs == [1]
    assert "replayed" not in first["fields"]  # type: ignore[operator]
    assert again["fields"] == {"replayed": True}
    assert again["text"] == "done"


def test_reusing_an_id_for_another_call_is_refused() -> None:
    records = CallRecords()
    records.run("c1", "write", {"file_path": "a"}, lambda: {"text": "ok"})
    with pytest.raises(InvalidArgument, match="already used for a different call"):
        records.run("c1", "write", {"file_path": "b"}, lambda: {"text": "ok"})


def test_a_retry_during_the_first_attempt_waits_for_it() -> None:
    records = CallRecords()
    runs: list[int] = []
    results: list[dict[str, object]] = []

    def slow() -> dict[str, object]:
        runs.append(1)
        time.sleep(0.3)
        return {"text": "slow"}

    threads = [
        threading.Thread(target=lambda: results.append(records.run("c", "bash", {}, slow)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert runs == [1]
    assert sorted("fields" in r for r in results) == [False, True, True]


def test_a_failed_attempt_is_not_recorded() -> None:
    records = CallRecords()

    def boom() -> dict[str, object]:
        raise RuntimeError("executor bug")

    with pytest.raises(RuntimeError):
        records.run("c", "edit", {}, boom)
    assert records.run("c", "edit", {}, lambda: {"text": "second try"}) == {"text": "second try"}


def test_records_are_bounded() -> None:
    records = CallRecords(limit=3)
    for index in range(5):
        records.run(f"c{index}", "bash", {}, lambda: {"text": "x"})
    runs: list[int] = []
    records.run("c0", "bash", {}, lambda: runs.append(1) or {"text": "again"})
    assert runs == [1]  # evicted: the oldest record is gone
    assert records.run("c4", "bash", {}, lambda: {"text": "never"})["fields"] == {"replayed": True}

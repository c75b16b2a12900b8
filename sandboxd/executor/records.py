"""Completed tool calls by ``tool_call_id``, so a retry never repeats a side effect.

An agent runtime that lost a response retries with the same id; the
executor answers with the recorded result instead of writing, editing or
running again. A retry that arrives while the first attempt is still
running waits for it. The records live in the executor, next to the files,
so they survive a daemon restart; the newest ``limit`` are kept.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from sandboxd.contract.errors import InvalidArgument

#: Tools whose effects must not happen twice; the others are simply re-run.
#: bash_output moves the job's read offset, so a retry must not lose output.
RECORDED_TOOLS = frozenset({"write", "edit", "bash", "bash_output", "kill_shell"})
DEFAULT_LIMIT = 1024


def _replayed(result: dict[str, Any]) -> dict[str, Any]:
    fields = result.get("fields")
    return {**result, "fields": {**(fields if isinstance(fields, dict) else {}), "replayed": True}}


def _fingerprint(name: str, args: Mapping[str, Any]) -> str:
    text = json.dumps([name, args], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


class CallRecords:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._done: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
        self._running: dict[str, tuple[str, threading.Event]] = {}

    def run(
        self,
        call_id: str,
        name: str,
        args: Mapping[str, Any],
        call: Callable[[], dict[str, Any]],
    ) -> dict[str, Any]:
        fingerprint = _fingerprint(name, args)
        while True:
            with self._lock:
                recorded = self._done.get(call_id)
                if recorded is not None:
                    self._check_same(call_id, recorded[0], fingerprint)
                    return _replayed(recorded[1])
                running = self._running.get(call_id)
                if running is None:
                    self._running[call_id] = (fingerprint, threading.Event())
                    break
            self._check_same(call_id, running[0], fingerprint)
            running[1].wait()
            # The first attempt finished (recorded) or failed (not recorded): loop.
        try:
            result = call()
            with self._lock:
                self._done[call_id] = (fingerprint, result)
                while len(self._done) > self._limit:
                    self._done.popitem(last=False)
            return result
        finally:
            with self._lock:
                _, event = self._running.pop(call_id)
            event.set()

    @staticmethod
    def _check_same(call_id: str, recorded: str, fingerprint: str) -> None:
        if recorded != fingerprint:
            raise InvalidArgument(
                f"tool_call_id {call_id!r} was already used for a different call; "
                "use a new id for a new call"
            )

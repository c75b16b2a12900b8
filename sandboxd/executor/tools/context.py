"""What a tool call can see of its session, without importing the session."""

from __future__ import annotations

from dataclasses import dataclass

from .locks import PathLocks
from .readstate import ReadState
from .text import MAX_TEXT_BYTES


@dataclass
class Context:
    workdir: str
    state_dir: str
    read_state: ReadState
    path_locks: PathLocks
    #: Seconds a grep may run before it returns partial results.
    grep_time_limit: float = 30.0
    #: "rg" or "python" to force a grep engine; None decides per call.
    grep_engine: str | None = None
    #: Largest file write/edit may produce (reported in the error).
    max_write_bytes: int = MAX_TEXT_BYTES

"""What a tool call can see of its session, without importing the session."""

from __future__ import annotations

from dataclasses import dataclass

from .locks import PathLocks
from .readstate import ReadState


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

"""What grep's two engines share: the query, the hits, the failures.

Each engine turns a ``Query`` into ``FileHits`` in ripgrep's ``--sort path``
order; ``grep`` does all formatting and paging, so both engines' output is
identical by construction wherever their matches are.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Query:
    pattern: str
    workdir: str
    root: str  # absolute file or folder
    root_is_file: bool
    glob: str | None
    type_globs: tuple[str, ...]
    ignore_case: bool
    multiline: bool
    literal: bool
    before: int
    after: int
    files_only: bool  # one match per file is enough


@dataclass(frozen=True)
class Hit:
    number: int
    text: str
    is_match: bool


@dataclass
class FileHits:
    path: str  # display path
    hits: list[Hit] = field(default_factory=list)


class InvalidPattern(Exception):
    """The engine rejected the regex; the message is the engine's own."""


class TooDeep(Exception):
    """Raised after the last result: ``count`` folders lay past the path length limit."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


class SearchStopped(Exception):
    """The search ran out of time or was cancelled before it finished."""

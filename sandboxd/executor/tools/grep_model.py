"""What grep's two engines share: the query, the hits, the failures.

Each engine turns a ``Query`` into ``FileHits`` in ripgrep's ``--sort path``
order, or, when the query is not ``ordered``, in any order with each file's
place in that order (``FileHits.order``); ``grep`` does all formatting and
paging (and the sorting), so both engines' output is identical by
construction wherever their matches are.
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
    #: The results must arrive in path order (content mode pages its stream);
    #: False lets an engine search files in parallel and yield as they finish.
    ordered: bool = True


@dataclass(frozen=True)
class Hit:
    number: int
    text: str
    is_match: bool


def path_order(raw: bytes) -> tuple[bytes, ...]:
    """A path's place in ripgrep's ``--sort path`` order (a depth-first walk with
    each folder's entries in byte order): its components, as bytes."""
    return tuple(raw.split(b"/"))


@dataclass
class FileHits:
    path: str  # display path
    #: The file's lines; may be empty for a ``files_only`` query (the file matched).
    hits: list[Hit] = field(default_factory=list)
    #: Set by an engine that yields out of order (a query not ``ordered``):
    #: ``path_order`` of the path as the engine found it, its bytes (which the
    #: display path may have lost to U+FFFD). None: the engine yields in order.
    order: tuple[bytes, ...] | None = None


class InvalidPattern(Exception):
    """The engine rejected the regex; the message is the engine's own."""


class TooDeep(Exception):
    """Raised after the last result: ``count`` folders lay past the path length limit."""

    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.count = count


class SearchStopped(Exception):
    """The search ran out of time or was cancelled before it finished."""

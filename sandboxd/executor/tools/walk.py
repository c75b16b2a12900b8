"""Depth-first walk of a folder in ripgrep's ``--sort path`` order.

Skips ``.git``, honours ``.gitignore`` (see ``gitignore``), never follows
symlinked folders (no loops), and can also report what .gitignore hid so
glob can say how many matches it did not show.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import gitignore
from .gilpause import pause


@dataclass(frozen=True)
class Entry:
    path: str  # absolute
    rel: str  # relative to the walk's root, "/"-separated
    name: str
    is_symlink: bool
    ignored: bool


#: Linux's PATH_MAX, the NUL included: a folder whose path is this long cannot
#: be opened by path, so a walk by paths stops there and says so.
MAX_PATH_BYTES = 4096


_FS_CODEC = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())


class WalkStopped(Exception):
    """The caller's stop check fired (cancelled, or past its deadline)."""


def _sorted_entries(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError:
        return []  # unreadable folders are skipped, as ripgrep does
    # Byte order, as ripgrep sorts (os.fsencode, without its per-call checks).
    entries.sort(key=lambda e: e.name.encode(*_FS_CODEC))
    return entries


class Walk:
    """Iterate the non-folder entries below ``root``.

    With ``include_ignored`` the entries .gitignore hides are yielded too
    (flagged), up to ``max_ignored`` of them; past that, ignored folders are
    no longer entered and ``ignored_incomplete`` is set. ``descend_ignored``
    False yields ignored files but never enters an ignored folder.
    """

    def __init__(
        self,
        root: str,
        *,
        respect_ignore: bool = True,
        include_ignored: bool = False,
        max_ignored: int = 50_000,
        stop: Callable[[], bool] | None = None,
        descend_ignored: bool = True,
    ) -> None:
        self.root = root
        self.respect_ignore = respect_ignore
        self.include_ignored = include_ignored
        self.budget = max_ignored
        self.stop = stop
        self.descend_ignored = descend_ignored
        self.ignored_incomplete = False
        #: Folders not entered because their path is too long to open.
        self.too_deep = 0

    def __iter__(self) -> Iterator[Entry]:
        ignores = gitignore.ancestors(self.root) if self.respect_ignore else ()
        return self._walk(ignores)

    def _enter(
        self, folder: str, rel: str, ignores: tuple[gitignore.IgnoreFile, ...], hidden: bool
    ) -> _Frame:
        if self.stop is not None and self.stop():
            raise WalkStopped
        entries = _sorted_entries(folder)
        # Only a folder that lists a .gitignore is asked for one: no failed
        # open per folder (a .gitignore made after the listing is missed, as
        # it would be by a walk that read it a moment earlier).
        if self.respect_ignore and not hidden and any(e.name == ".gitignore" for e in entries):
            own = gitignore.load(folder)
            if own is not None:
                ignores = (*ignores, own)
        return _Frame(folder, rel, ignores, hidden, iter(entries))

    def _walk(self, ignores: tuple[gitignore.IgnoreFile, ...]) -> Iterator[Entry]:
        # An explicit stack, not recursion: sandbox code can make a tree far
        # deeper than Python's recursion limit.
        stack = [self._enter(self.root, "", ignores, False)]
        steps = 0
        while stack:
            steps += 1
            if not steps & 63:
                pause()  # a tree of any size, walked in Python: the other calls go on
            frame = stack[-1]
            entry = next(frame.entries, None)
            if entry is None:
                stack.pop()
                continue
            if entry.name == ".git":
                continue
            # entry.path is the folder joined with the name, as os.path.join would.
            path = entry.path
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            ignored = frame.hidden or (
                bool(frame.ignores) and gitignore.is_ignored(frame.ignores, path, is_dir)
            )
            if ignored:
                if not self.include_ignored:
                    continue
                if self.budget <= 0:
                    self.ignored_incomplete = True
                    continue
                self.budget -= 1
            if is_dir:
                if ignored and not self.descend_ignored:
                    continue
                if len(os.fsencode(path)) >= MAX_PATH_BYTES - 1:
                    self.too_deep += 1
                    continue
                stack.append(
                    self._enter(path, frame.rel + entry.name + "/", frame.ignores, ignored)
                )
            else:
                yield Entry(path, frame.rel + entry.name, entry.name, is_link, ignored)


@dataclass
class _Frame:
    folder: str
    rel: str
    ignores: tuple[gitignore.IgnoreFile, ...]
    hidden: bool
    entries: Iterator[os.DirEntry[str]]

"""Read state: which files this instance has seen, by content hash.

``write`` over an existing file and ``edit`` require the file to be known and
unchanged since the instance last read, wrote or edited it. The check is by
content hash, not mtime, so a ``touch`` is not a change. On a change the
error shows a short diff and the state is refreshed, so an immediate retry
(after the model has looked at the diff) goes through.

To show that diff the old content is needed, so small files also keep their
decoded text, within a memory budget (oldest copies dropped first).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import threading
from dataclasses import dataclass

from .fsio import open_regular
from .text import decode

#: Keep a copy for diffs of files up to this size...
_MAX_COPY_BYTES = 1024 * 1024
#: ...and of all copies together up to this much.
_MAX_COPIES_BYTES = 64 * 1024 * 1024
_MAX_DIFF_LINES = 60


@dataclass
class _Seen:
    digest: str | None  # None while a background hash is running
    text: str | None
    done: threading.Event
    #: (device, inode, size, mtime) of a file hashed in the background, so a
    #: re-read of an unchanged huge file reuses its hash instead of rehashing.
    identity: tuple[int, int, int, int] | None = None


def _identity(path: str) -> tuple[int, int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def hash_file(path: str) -> str:
    """sha256 of a file, streamed so size does not matter for memory."""
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        while chunk := fh.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def short_diff(old: str, new: str, name: str) -> str:
    lines = list(
        difflib.unified_diff(
            old.splitlines(),
            new.splitlines(),
            f"{name} (when last read)",
            f"{name} (now)",
            n=1,
            lineterm="",
        )
    )
    lines = [line if len(line) <= 400 else line[:400] + "…" for line in lines]
    if len(lines) > _MAX_DIFF_LINES:
        more = len(lines) - _MAX_DIFF_LINES
        lines = [*lines[:_MAX_DIFF_LINES], f"[... {more} more diff lines not shown ...]"]
    return "\n".join(lines) if lines else "(only line endings or invisible bytes differ)"


class ReadState:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()
        self._seen: dict[str, _Seen] = {}
        self._copies_bytes = 0

    @staticmethod
    def key(path: str) -> str:
        # Two spellings of one file (symlink, ..) share one entry.
        return os.path.realpath(path)

    def record(self, path: str, data: bytes) -> None:
        text = decode(data).text if len(data) <= _MAX_COPY_BYTES else None
        done = threading.Event()
        done.set()
        self._store(path, _Seen(hashlib.sha256(data).hexdigest(), text, done))

    def record_streamed(self, path: str) -> None:
        """Record a file too large to hash inline: hash it in the background.

        A read of a huge file must stay as fast as its first page; the hash
        is only needed if the instance later writes or edits the file.
        """
        identity = _identity(path)
        with self._lock:
            known = self._seen.get(self.key(path))
        if identity is not None and known is not None and known.identity == identity:
            return  # hashed (or being hashed) already, and unchanged since
        seen = _Seen(None, None, threading.Event(), identity)
        self._store(path, seen)

        def work() -> None:
            try:
                seen.digest = hash_file(path)
            except OSError:
                seen.digest = ""
            seen.done.set()

        threading.Thread(target=work, name="sandboxd-hash", daemon=True).start()

    def _store(self, path: str, seen: _Seen) -> None:
        key = self.key(path)
        with self._lock:
            old = self._seen.pop(key, None)
            if old is not None and old.text is not None:
                self._copies_bytes -= len(old.text)
            self._seen[key] = seen
            if seen.text is not None:
                self._copies_bytes += len(seen.text)
            # Insertion order is recency order: drop the oldest copies first.
            for entry in self._seen.values():
                if self._copies_bytes <= _MAX_COPIES_BYTES:
                    break
                if entry.text is not None and entry is not seen:
                    self._copies_bytes -= len(entry.text)
                    entry.text = None

    def forget(self, path: str) -> None:
        with self._lock:
            old = self._seen.pop(self.key(path), None)
            if old is not None and old.text is not None:
                self._copies_bytes -= len(old.text)

    def check(self, path: str, display: str, current: bytes | None, action: str) -> str | None:
        """None when ``action`` may change the file, else the error text.

        ``current`` is the file's content, or None when it is too large to
        hold (then it is hashed from disk and no diff is shown).
        """
        if not self.enabled:
            return None
        with self._lock:
            seen = self._seen.get(self.key(path))
        if seen is None:
            return (
                f"{display} has not been read by this instance, so the {action} was refused "
                f'and nothing was changed. Read it first (read file_path="{display}"), then '
                f"retry the {action}."
            )
        seen.done.wait()
        digest = hashlib.sha256(current).hexdigest() if current is not None else hash_file(path)
        if digest == seen.digest:
            return None
        if current is not None and seen.text is not None:
            diff = short_diff(seen.text, decode(current).text, display)
        else:
            diff = "(no diff: the file is too large to keep a copy of)"
        if current is not None:
            self.record(path, current)
        else:
            self.record_streamed(path)
        return (
            f"{display} changed since this instance last read it, so the {action} was refused "
            f"and nothing was changed. What changed:\n{diff}\n"
            f"The new content now counts as read: check that your {action} still fits it, "
            f"then retry."
        )

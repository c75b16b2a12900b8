"""Bash output, cleaned and bounded while it streams.

``Cleaner`` strips ANSI escapes and collapses carriage-return progress lines
to their last frame. ``Capture`` keeps the whole text while it is small, and
past that only a head and a tail, so 200 MB of output costs kilobytes of
memory; the full cleaned text goes to a log file (capped) as it arrives.
"""

from __future__ import annotations

import codecs
import re
from typing import Protocol

from .result import MAX_TEXT_CHARS

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erase line
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS/SOS/PM/APC strings
    r"|\x1b[@-Z\\-_]"  # two-character escapes
    r"|\x1b"
)
_CR_LINE = re.compile(r"[^\n]*\r[^\n]*")
#: A line longer than this without a newline is passed on in pieces.
_MAX_PENDING = 64 * 1024


def _last_frame(m: re.Match[str]) -> str:
    frames = [f for f in m.group().split("\r") if f]
    return frames[-1] if frames else ""


def clean(text: str) -> str:
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            text = _CR_LINE.sub(_last_frame, text)
    return text


class Cleaner:
    """Incremental ``clean`` over byte chunks; only whole lines are cleaned."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, data: bytes, final: bool = False) -> str:
        text = self._pending + self._decoder.decode(data, final)
        if final:
            self._pending = ""
            return clean(text)
        cut = text.rfind("\n") + 1
        self._pending = text[cut:]
        if len(self._pending) > _MAX_PENDING:
            pending = self._pending
            if "\r" in pending:
                # A progress bar that never ends its line: keep its last frame.
                frames = [f for f in pending.split("\r") if f]
                keep = frames[-1] if frames else ""
                self._pending = ("\r" + keep) if not pending.endswith("\r") else keep + "\r"
            if len(self._pending) > _MAX_PENDING:
                out, self._pending = self._pending, ""
                return clean(text[:cut]) + clean(out)
        return clean(text[:cut])


class Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


class Capture:
    """Bounded view of the cleaned output, plus the full log on disk."""

    def __init__(self, log: Sink | None, log_cap: int) -> None:
        self.log = log
        self.log_cap = log_cap
        self.log_bytes = 0
        self.log_full = False
        # Whole text kept up to here, then only a head and a tail this long.
        self.window = MAX_TEXT_CHARS * 2
        self.full: list[str] = []
        self.full_len = 0
        self.head = ""
        self.tail = ""
        self.streaming = False
        self.total_chars = 0
        self.total_newlines = 0

    def add(self, text: str) -> None:
        if not text:
            return
        if self.log is not None and not self.log_full:
            data = text.encode("utf-8", errors="replace")
            room = self.log_cap - self.log_bytes
            if len(data) > room:
                data = data[:room]
                self.log_full = True
            try:
                self.log.write(data)
            except OSError:
                # A full disk must not cost the model its command's result:
                # the log just ends here (the notice says it is capped).
                self.log_full = True
            else:
                self.log_bytes += len(data)
        self.total_chars += len(text)
        self.total_newlines += text.count("\n")
        if not self.streaming:
            self.full.append(text)
            self.full_len += len(text)
            if self.full_len <= self.window:
                return
            whole = "".join(self.full)
            self.full = []
            self.streaming = True
            self.head = whole[: self.window]
            self.tail = whole[-self.window :]
            return
        self.tail += text
        if len(self.tail) > self.window * 2:
            self.tail = self.tail[-self.window :]

    def render(self, limit: int, head_share: float = 0.2) -> tuple[str, bool]:
        """(text, truncated): the output within ``limit`` characters."""
        if not self.streaming:
            whole = "".join(self.full).rstrip()
            if len(whole) <= limit:
                return whole, False
            head_src, tail_src = whole, whole
            total_chars, total_newlines = len(whole), whole.count("\n")
        else:
            head_src = self.head
            tail_src = self.tail.rstrip()
            trimmed = len(self.tail) - len(tail_src)
            total_chars = self.total_chars - trimmed
            total_newlines = self.total_newlines - self.tail[len(tail_src) :].count("\n")
        budget = limit - 100  # room for the marker line
        head_size = int(budget * head_share)
        tail_size = budget - head_size
        head = head_src[:head_size]
        newline = head.rfind("\n")
        if newline > 0:
            head = head[: newline + 1]  # keep whole lines where there are any
        tail = tail_src[-tail_size:] if len(tail_src) > tail_size else tail_src
        if len(tail_src) > tail_size:
            newline = tail.find("\n")
            if 0 <= newline < len(tail) - 1:
                tail = tail[newline + 1 :]
        omitted_chars = max(0, total_chars - len(head) - len(tail))
        omitted_lines = max(0, total_newlines - head.count("\n") - tail.count("\n"))
        marker = f"[... {omitted_lines} lines ({omitted_chars} chars) omitted ...]"
        text = head.rstrip("\n") + "\n" + marker + "\n" + tail
        return text, True

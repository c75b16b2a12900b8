"""grep engine in pure Python, for hosts without ripgrep (the local backend).

It mirrors the ripgrep engine's choices: hidden files searched, .git skipped,
.gitignore honoured (a ``glob`` match re-includes an ignored file, as
ripgrep's overrides do), symlinks not followed, files with a NUL byte
skipped, and Rust regex syntax translated where Python's differs.
"""

from __future__ import annotations

import bisect
import os
import re
from collections import deque
from collections.abc import Callable, Iterator

from .fsio import open_regular
from .globpat import Glob, PatternError, compile_glob
from .grep_model import FileHits, Hit, InvalidPattern, Query, SearchStopped, TooDeep
from .paths import display
from .walk import Walk, WalkStopped

_BLOCK = 4 * 1024 * 1024
_MAX_MULTILINE_BYTES = 256 * 1024 * 1024
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7F", "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}  # fmt: skip
_UNICODE_CLASSES = {"L": "[^\\W\\d_]", "Letter": "[^\\W\\d_]", "N": "\\d", "Nd": "\\d"}


def _unsupported(pattern: str, what: str) -> InvalidPattern:
    return InvalidPattern(f"regex parse error:\n    {pattern}\nerror: {what}")


def translate(pattern: str) -> str:
    """Rust regex syntax to Python's, rejecting what Rust rejects."""
    if re.search(r"\(\?<?[=!]", pattern):
        return _raise(
            _unsupported(
                pattern, "look-around, including look-ahead and look-behind, is not supported"
            )
        )
    if re.search(r"(?<!\\)(\\\\)*\\[1-9]", pattern):
        return _raise(_unsupported(pattern, "backreferences are not supported"))
    out = re.sub(r"\[:(\^?)(\w+):\]", lambda m: _posix(pattern, m), pattern)
    out = re.sub(
        r"(?<!\\)((?:\\\\)*)\\([pP])(?:\{(\w+)\}|(\w))",
        lambda m: m.group(1) + _unicode_class(pattern, m),
        out,
    )
    return re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", out)


def _raise(exc: Exception) -> str:
    raise exc


def _posix(pattern: str, m: re.Match[str]) -> str:
    if m.group(2) not in _POSIX:
        raise _unsupported(pattern, f"unrecognized POSIX class {m.group(2)}")
    if m.group(1):
        raise _unsupported(pattern, "negated POSIX classes need the ripgrep engine")
    return _POSIX[m.group(2)]


def _unicode_class(pattern: str, m: re.Match[str]) -> str:
    name = m.group(3) or m.group(4)
    if name not in _UNICODE_CLASSES:
        raise _unsupported(pattern, f"Unicode class \\p{{{name}}} is not supported here")
    if m.group(2) == "P":
        return "[\\W\\d_]" if _UNICODE_CLASSES[name].startswith("[^") else "\\D"
    return _UNICODE_CLASSES[name]


def compile_query(q: Query) -> re.Pattern[str]:
    flags = re.MULTILINE
    if q.ignore_case:
        flags |= re.IGNORECASE
    if q.multiline:
        flags |= re.DOTALL
    source = re.escape(q.pattern) if q.literal else translate(q.pattern)
    try:
        return re.compile(source, flags)
    except re.error as exc:
        raise InvalidPattern(f"regex parse error: {exc}") from None


def _blocks(path: str, stop: Callable[[], bool]) -> Iterator[str] | None:
    """The file as text blocks that end at line ends; None for a binary file."""
    with open_regular(path) as fh:
        head = fh.read(_BLOCK)
        if b"\x00" in head:
            return None
        rest = fh.read(1) if len(head) == _BLOCK else b""
    if not rest:
        return iter([_clean(head, True)])
    return _stream(path, stop)


def _clean(data: bytes, first: bool) -> str:
    text = data.decode("utf-8", errors="replace")
    if first:
        text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n")


def _stream(path: str, stop: Callable[[], bool]) -> Iterator[str]:
    with open_regular(path) as fh:
        carry = b""
        first = True
        while True:
            if stop():
                raise SearchStopped
            chunk = fh.read(_BLOCK)
            data = carry + chunk
            if not chunk:
                if data:
                    yield _clean(data, first)
                return
            if b"\x00" in chunk:
                raise _Binary
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                carry = data
                continue
            yield _clean(data[:cut], first)
            first = False
            carry = data[cut:]


class _Binary(Exception):
    pass


def _search_lines(blocks: Iterator[str], rx: re.Pattern[str], q: Query) -> list[Hit]:
    hits: list[Hit] = []
    before: deque[Hit] = deque(maxlen=q.before or 1)
    after_left = 0
    number = 0
    for block in blocks:
        lines = block.split("\n")
        if block.endswith("\n"):
            lines.pop()
        if after_left == 0 and rx.search(block) is None:
            # No line of this block can match: only remember its tail.
            start = number + 1
            if q.before:
                for k in range(max(0, len(lines) - q.before), len(lines)):
                    before.append(Hit(start + k, lines[k], False))
            number += len(lines)
            continue
        for line in lines:
            number += 1
            if rx.search(line):
                if q.before:
                    hits.extend(before)
                before.clear()
                hits.append(Hit(number, line, True))
                if q.files_only:
                    return hits
                after_left = q.after
            elif after_left:
                hits.append(Hit(number, line, False))
                after_left -= 1
            elif q.before:
                before.append(Hit(number, line, False))
    return hits


def _search_multiline(text: str, rx: re.Pattern[str], q: Query) -> list[Hit]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    matched: set[int] = set()
    for m in rx.finditer(text):
        if m.start() >= len(text) and text.endswith("\n"):
            break  # the empty match after the final newline is not a line
        first = bisect.bisect_right(starts, m.start())
        last = bisect.bisect_right(starts, max(m.start(), m.end() - 1))
        matched.update(range(first, min(last, len(lines)) + 1))
        if q.files_only:
            break
    wanted: dict[int, bool] = {}
    for n in sorted(matched):
        for k in range(max(1, n - q.before), min(len(lines), n + q.after) + 1):
            wanted[k] = wanted.get(k, False) or k in matched
    return [Hit(n, lines[n - 1], wanted[n]) for n in sorted(wanted)]


def search_file(path: str, rx: re.Pattern[str], q: Query, stop: Callable[[], bool]) -> list[Hit]:
    try:
        blocks = _blocks(path, stop)
        if blocks is None:
            return []
        if q.multiline:
            if os.path.getsize(path) > _MAX_MULTILINE_BYTES:
                return []
            return _search_multiline("".join(blocks), rx, q)
        return _search_lines(blocks, rx, q)
    except (_Binary, OSError):
        return []


def _filters(q: Query) -> tuple[Callable[[str, str], bool], Callable[[str, str], bool]]:
    """(wanted, re-included) tests on (display path, name) for ``glob``/``type``."""
    globs: list[tuple[Glob, bool, bool]] = []
    if q.glob:
        negate = q.glob.startswith("!")
        body = q.glob[1:] if negate else q.glob
        try:
            globs.append((compile_glob(body.lstrip("/")), "/" in body, negate))
        except PatternError as exc:
            raise InvalidPattern(f"invalid glob {q.glob!r}: {exc}") from None
    types = [compile_glob(t) for t in q.type_globs]

    def glob_verdict(shown: str, name: str) -> bool | None:
        for matcher, anchored, negate in globs:
            if matcher.match(shown if anchored else name):
                return not negate
            return None if negate else False
        return None

    def wanted(shown: str, name: str) -> bool:
        if glob_verdict(shown, name) is False:
            return False
        return not types or any(t.match(name) for t in types)

    def reincluded(shown: str, name: str) -> bool:
        return glob_verdict(shown, name) is True

    return wanted, reincluded


def search(q: Query, stop: Callable[[], bool]) -> Iterator[FileHits]:
    rx = compile_query(q)
    if q.root_is_file:
        hits = search_file(q.root, rx, q, stop)
        if hits:
            yield FileHits(display(q.workdir, q.root), hits)
        return
    wanted, reincluded = _filters(q)
    walker = Walk(q.root, include_ignored=True, stop=stop, max_ignored=10**9, descend_ignored=False)
    try:
        for entry in walker:
            if entry.is_symlink:
                continue
            shown = display(q.workdir, entry.path)
            if entry.ignored and not reincluded(shown, entry.name):
                continue
            if not wanted(shown, entry.name):
                continue
            hits = search_file(entry.path, rx, q, stop)
            if hits:
                yield FileHits(shown, hits)
            if stop():
                raise SearchStopped
    except WalkStopped:
        raise SearchStopped from None
    if walker.too_deep:
        raise TooDeep(walker.too_deep)

"""Glob patterns, matched in linear time: ``*``, ``**``, ``?``, ``[...]``, ``{a,b}``.

Used by ``glob`` (with braces) and by ``gitignore`` (without: git has none).
``*`` and ``?`` never match ``/``; ``**`` as a whole path segment matches
any number of folders, including none (at the end of a pattern: one or more).

Patterns come from the sandbox (a planted ``.gitignore``) and from models,
so they are not translated to a backtracking regex: ``*a*a*a…*ab`` against
a long name of ``a``s took Python's ``re`` exponential time with the GIL
held, and wedged every other call of the sandbox (issue 23, item 7). Here a
pattern is split at ``/`` into segments, and each segment at its stars into
fixed-length chunks. A text matches when its segments match in order, each
``**`` skipping whole segments; within a segment the chunks between stars
are placed leftmost one after another, and the last chunk at the end. That
greedy placement is exact (a later placement never helps the rest: the gap
after it is a star that can absorb the difference, and no ``/`` can fall in
it), and it costs at most len(text) x len(pattern) character comparisons,
whatever the pattern. Braces are expanded first (at most MAX_ALTERNATIVES).

The placement runs as one regex per glob where Python has atomic groups
(3.11): each chunk's leftmost search and each segment is atomic, so the
engine never goes back into them and the match stays linear; as fast as the
plain translation was. An older ``python3`` in an image runs the same
placement in Python (``Alternative.match``), a few times slower.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import lru_cache
from itertools import product

MAGIC = frozenset("*?[{")
#: Most patterns one braced glob may expand to.
MAX_ALTERNATIVES = 1024


class PatternError(ValueError):
    pass


# ------------------------------------------------------------ parsing

# Tokens: a one-character item (a _Lit, that character; or a str, a regex
# matching one character), STAR / DOUBLE_STAR (a run of "*"), SEP ("/"), or a
# brace (a tuple of alternatives, each a token list).
_STAR = object()
_DOUBLE_STAR = object()
_SEP = object()
Token = object


class _Lit(str):
    """A literal character of the pattern."""

    __slots__ = ()


def _class(pattern: str, i: int) -> tuple[str, int]:
    """Translate ``[...]`` starting at ``pattern[i] == "["`` to a one-character regex."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    body: list[str] = []
    first = True
    while j < len(pattern) and (pattern[j] != "]" or first):
        c = pattern[j]
        if c == "\\" and j + 1 < len(pattern):
            j += 1
            c = pattern[j]
        if j + 2 < len(pattern) and pattern[j + 1] == "-" and pattern[j + 2] != "]":
            low, high = c, pattern[j + 2]
            if low > high:
                raise PatternError(f"bad range {low}-{high} in [...] at position {i + 1}")
            body.append(re.escape(low) + "-" + re.escape(high))
            j += 3
        else:
            body.append(re.escape(c))
            j += 1
        first = False
    if j >= len(pattern):
        raise PatternError(f"unclosed [ at position {i + 1}")
    inner = "".join(body)
    # A class never matches the separator, like * and ?.
    return ("[^/" + inner + "]" if negate else "(?!/)[" + inner + "]"), j + 1


def _tokens(pattern: str, i: int, depth: int, braces: bool) -> tuple[list[Token], int]:
    out: list[Token] = []
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if depth and c in ",}":
            return out, i
        if c == "\\":
            out.append(_Lit(pattern[i + 1] if i + 1 < n else "\\"))
            i += 2
        elif c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            out.append(_DOUBLE_STAR if j - i >= 2 else _STAR)
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            part, i = _class(pattern, i)
            out.append(part)
        elif c == "/":
            out.append(_SEP)
            i += 1
        elif c == "{" and braces:
            start = i
            choices: list[list[Token]] = []
            i += 1
            while True:
                inner, i = _tokens(pattern, i, depth + 1, braces)
                choices.append(inner)
                if i >= n:
                    raise PatternError(f"unclosed {{ at position {start + 1}")
                if pattern[i] == "}":
                    i += 1
                    break
                i += 1  # a comma
            out.append(tuple(choices))
        else:
            out.append(_Lit(c))
            i += 1
    return out, i


def _expand(tokens: list[Token]) -> list[list[Token]]:
    """Every brace-free token list ``tokens`` stands for."""
    choices: list[list[list[Token]]] = []
    count = 1
    for token in tokens:
        if isinstance(token, tuple):
            options = [flat for alternative in token for flat in _expand(alternative)]
        else:
            options = [[token]]
        count *= len(options)
        if count > MAX_ALTERNATIVES:
            raise PatternError(
                f"the braces expand to more than {MAX_ALTERNATIVES} patterns; use fewer"
            )
        choices.append(options)
    return [[token for part in combination for token in part] for combination in product(*choices)]


# ------------------------------------------------------------ matching


class _Chunk:
    """Characters of fixed number between two stars: a literal, or a small regex."""

    __slots__ = ("_regex", "literal", "pattern", "width")

    def __init__(self, items: list[str]) -> None:
        self.width = len(items)
        plain = all(isinstance(item, _Lit) for item in items)
        self.literal = "".join(items) if plain else None
        self.pattern = "".join(
            re.escape(item) if isinstance(item, _Lit) else item for item in items
        )
        self._regex: re.Pattern[str] | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        # Only the pure-Python placement uses it: compiled on first use.
        if self._regex is None:
            # Fixed width, no quantifier: searching it cannot backtrack.
            self._regex = re.compile(self.pattern, re.S)
        return self._regex

    def at(self, text: str, pos: int) -> bool:
        if self.literal is not None:
            return text.startswith(self.literal, pos)
        return self.regex.match(text, pos) is not None

    def find(self, text: str, pos: int, end: int) -> int:
        """The leftmost start >= pos of a match ending by ``end``, or -1."""
        if self.literal is not None:
            return text.find(self.literal, pos, end)
        found = self.regex.search(text, pos, end)
        return -1 if found is None else found.start()


class _Segment:
    """One path segment's pattern: chunks with a star between each two."""

    __slots__ = ("chunks", "fixed", "literal")

    def __init__(self, tokens: list[Token]) -> None:
        chunks: list[list[str]] = [[]]
        for token in tokens:
            if token is _STAR or token is _DOUBLE_STAR:
                if chunks[-1] or len(chunks) == 1:
                    chunks.append([])
                continue
            assert isinstance(token, str)
            chunks[-1].append(token)
        self.chunks = [_Chunk(items) for items in chunks]
        self.fixed = len(self.chunks) == 1
        first = self.chunks[0]
        self.literal = first.literal if self.fixed else None

    def match(self, text: str) -> bool:
        if self.literal is not None:
            return text == self.literal
        chunks = self.chunks
        first, last = chunks[0], chunks[-1]
        if self.fixed:
            return len(text) == first.width and first.at(text, 0)
        end = len(text) - last.width
        if end < first.width or not first.at(text, 0) or not last.at(text, end):
            return False
        pos = first.width
        for chunk in chunks[1:-1]:
            found = chunk.find(text, pos, end)
            if found < 0:
                return False
            pos = found + chunk.width
        return True


class Alternative:
    """One brace-free pattern: segments, and the ``**`` between groups of them."""

    __slots__ = ("groups", "single", "trailing")

    def __init__(self, tokens: list[Token]) -> None:
        segments: list[list[Token]] = [[]]
        for token in tokens:
            if token is _SEP:
                segments.append([])
            else:
                segments[-1].append(token)
        # Groups of segment patterns; a whole-segment "**" separates two groups.
        groups: list[list[_Segment]] = [[]]
        for segment in segments:
            if len(segment) == 1 and segment[0] is _DOUBLE_STAR:
                groups.append([])
            else:
                groups[-1].append(_Segment(segment))
        self.groups = groups
        #: Ends in "**": one or more segments more (as "a/**" needs "a/" and something).
        self.trailing = len(groups) > 1 and not groups[-1]
        self.single = groups[0][0] if len(groups) == 1 and len(groups[0]) == 1 else None

    def match(self, text: str) -> bool:
        if self.single is not None:
            return "/" not in text and self.single.match(text)
        parts = text.split("/")
        groups = self.groups
        head = groups[0]
        if len(groups) == 1:
            return len(parts) == len(head) and _fits(head, parts, 0)
        if len(parts) < len(head) or not _fits(head, parts, 0):
            return False
        pos = len(head)
        tail = groups[-1]
        end = len(parts) - len(tail)
        if self.trailing:
            end -= 1  # room for the one segment the final "**" needs
        if end < pos:
            return False
        for group in groups[1:-1]:
            while pos + len(group) <= end and not _fits(group, parts, pos):
                pos += 1
            if pos + len(group) > end:
                return False
            pos += len(group)
        return self.trailing or _fits(tail, parts, end)


def _fits(group: list[_Segment], parts: list[str], at: int) -> bool:
    return all(segment.match(parts[at + k]) for k, segment in enumerate(group))


# ------------------------------------------------------------ as one regex

#: Python's re has atomic groups from 3.11 on.
ATOMIC = sys.version_info >= (3, 11)
_SKIP = "(?:[^/]*/)*"  # whole segments: each turn ends at the next "/"


def _segment_regex(segment: _Segment) -> str:
    parts = [chunk.pattern for chunk in segment.chunks]
    if len(parts) <= 2:
        # At most one star: its backtracking is linear, and every place it
        # could end but the segment's end fails at once on the "/" after.
        return "[^/]*".join(parts)
    middle = "".join(f"(?>[^/]*?{part})" for part in parts[1:-1])
    # Atomic as a whole: the segment is matched once, never re-split.
    return f"(?>{parts[0]}{middle}[^/]*{parts[-1]}(?=/|\\Z))"


def _group_regex(group: list[_Segment]) -> str:
    return "/".join(_segment_regex(segment) for segment in group)


def _alternative_regex(alternative: Alternative) -> str:
    groups = alternative.groups
    if len(groups) == 1:
        return _group_regex(groups[0]) + "\\Z"
    head, middle, tail = groups[0], groups[1:-1], groups[-1]
    out = _group_regex(head) + "/" if head else ""
    for group in middle:
        if group:  # the leftmost place the group fits, kept
            out += f"(?>{_SKIP}?{_group_regex(group)}/)"
    if alternative.trailing:
        return out + ".*"
    return out + _SKIP + _group_regex(tail) + "\\Z"


class Glob:
    """A compiled glob; ``match(text)`` is true (a match object, or True) when
    it matches the whole text, false otherwise."""

    __slots__ = ("_alternatives", "match", "pattern")

    def __init__(
        self, pattern: str, alternatives: list[Alternative], *, atomic: bool = ATOMIC
    ) -> None:
        self.pattern = pattern
        self._alternatives = alternatives
        self.match: Callable[[str], object]
        if atomic:
            # The regex's own method: no Python call per match on the hot path.
            regex = "|".join(_alternative_regex(alternative) for alternative in alternatives)
            self.match = re.compile("(?s:" + regex + ")").match
        else:
            self.match = self._placed

    def _placed(self, text: str) -> bool:
        return any(alternative.match(text) for alternative in self._alternatives)


def alternatives(pattern: str, braces: bool = True) -> list[Alternative]:
    """``pattern`` parsed (its braces expanded); PatternError if it does not parse.
    Several patterns' alternatives make one ``Glob`` that matches what any does."""
    tokens, _ = _tokens(pattern, 0, 0, braces)
    return [Alternative(flat) for flat in _expand(tokens)]


@lru_cache(maxsize=256)
def compile_glob(pattern: str, braces: bool = True, *, atomic: bool = ATOMIC) -> Glob:
    """A matcher for the whole path (or name); PatternError if it does not parse.
    ``atomic`` False: the pure-Python placement (what Python < 3.11 runs)."""
    return Glob(pattern, alternatives(pattern, braces), atomic=atomic)


def has_magic(text: str) -> bool:
    return any(c in MAGIC for c in text)

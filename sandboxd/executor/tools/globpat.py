"""Glob patterns to regular expressions: ``*``, ``**``, ``?``, ``[...]``, ``{a,b}``.

Used by ``glob`` (with braces) and by ``gitignore`` (without: git has none).
``*`` and ``?`` never match ``/``; ``**`` as a whole path segment matches
any number of folders, including none.
"""

from __future__ import annotations

import re
from functools import lru_cache

MAGIC = frozenset("*?[{")


class PatternError(ValueError):
    pass


def _class(pattern: str, i: int) -> tuple[str, int]:
    """Translate ``[...]`` starting at ``pattern[i] == "["``."""
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


def _parse(pattern: str, i: int, depth: int, braces: bool) -> tuple[str, int]:
    out: list[str] = []
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if depth and c in ",}":
            return "".join(out), i
        if c == "\\":
            out.append(re.escape(pattern[i + 1]) if i + 1 < n else re.escape("\\"))
            i += 2
        elif c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            seg_start = i == 0 or pattern[i - 1] in "/{,"
            seg_end = j == n or pattern[j] in "/,}"
            if j - i >= 2 and seg_start and seg_end:
                if j < n and pattern[j] == "/":
                    out.append("(?:.*/)?")
                    j += 1
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
            i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            part, i = _class(pattern, i)
            out.append(part)
        elif c == "{" and braces:
            start = i
            alternatives = []
            i += 1
            while True:
                part, i = _parse(pattern, i, depth + 1, braces)
                alternatives.append(part)
                if i >= n:
                    raise PatternError(f"unclosed {{ at position {start + 1}")
                if pattern[i] == "}":
                    i += 1
                    break
                i += 1  # a comma
            out.append("(?:" + "|".join(alternatives) + ")")
        else:
            out.append(re.escape(c))
            i += 1
    if depth:
        return "".join(out), i
    return "".join(out), i


@lru_cache(maxsize=256)
def compile_glob(pattern: str, braces: bool = True) -> re.Pattern[str]:
    """A regex that must ``fullmatch`` the whole path (or name)."""
    body, _ = _parse(pattern, 0, 0, braces)
    try:
        return re.compile("(?s:" + body + r")\Z")
    except re.error as exc:  # pragma: no cover - the translation escapes everything
        raise PatternError(str(exc)) from None


def has_magic(text: str) -> bool:
    return any(c in MAGIC for c in text)

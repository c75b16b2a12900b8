"""Where ``old_string`` occurs in a file, trying looser levels in order.

TOOLS.md levels: exact; CRLF-insensitive; curly quotes/dashes/non-breaking
spaces normalised; trailing whitespace per line ignored; a uniform
indentation shift. Each level includes the normalisations before it, and
matching stops at the first level with any match, so uniqueness is judged
at that level. Levels 2-4 compare normalised copies of both strings and map
the match back to the original text through the kept segments; level 5 is
line based.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

LEVELS = ("exact", "crlf", "unicode", "trailing_whitespace", "indentation")

NOTES = {
    "crlf": "Note: matched after normalising line endings (CRLF vs LF).",
    "unicode": ("Note: matched after normalising curly quotes, dashes and non-breaking spaces."),
    "trailing_whitespace": "Note: matched ignoring trailing whitespace at the ends of lines.",
    "indentation": (
        "Note: matched with a uniform indentation shift; new_string was re-indented by the "
        "same shift."
    ),
}

_UNICODE = str.maketrans(
    {
        "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
        "\u2015": "-", "\u2212": "-",
        "\u00a0": " ", "\u2007": " ", "\u202f": " ", "\u2009": " ", "\u200a": " ",
    }
)  # fmt: skip
_CR_BEFORE_LF = re.compile(r"\r(?=\n)")
_TRAILING_WS = re.compile(r"[^\S\n]+(?=\n|\Z)")


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    replacement: str


class _Normalised:
    """A normalised copy of a text that can map positions back."""

    def __init__(self, text: str, level: int) -> None:
        if level >= 3:
            text = text.translate(_UNICODE)  # one char for one: positions hold
        drops: list[tuple[int, int]] = []
        if level >= 2:
            drops += [m.span() for m in _CR_BEFORE_LF.finditer(text)]
        if level >= 4:
            drops += [m.span() for m in _TRAILING_WS.finditer(text)]
        drops.sort()
        # Kept segments as (normalised start, original start).
        self.norm_starts: list[int] = []
        self.orig_starts: list[int] = []
        pieces: list[str] = []
        pos = length = 0
        for start, end in drops:
            if start < pos:  # overlapping drops (a CR that is also trailing space)
                pos = max(pos, end)
                continue
            if start > pos:
                self.norm_starts.append(length)
                self.orig_starts.append(pos)
                pieces.append(text[pos:start])
                length += start - pos
            pos = end
        if pos < len(text):
            self.norm_starts.append(length)
            self.orig_starts.append(pos)
            pieces.append(text[pos:])
        self.text = "".join(pieces)

    def original(self, index: int) -> int:
        segment = bisect.bisect_right(self.norm_starts, index) - 1
        return self.orig_starts[segment] + index - self.norm_starts[segment]


def normalise(text: str, level: int) -> str:
    return _Normalised(text, level).text


def _crlf_like(new: str, span: str) -> str:
    new = new.replace("\r\n", "\n")
    return new.replace("\n", "\r\n") if "\r\n" in span else new


def _find_all(haystack: str, needle: str) -> list[int]:
    found = []
    pos = haystack.find(needle)
    while pos >= 0:
        found.append(pos)
        pos = haystack.find(needle, pos + len(needle))
    return found


def _char_level(text: str, old: str, new: str, level: int) -> list[Match]:
    if level == 1:
        return [Match(p, p + len(old), _crlf_like(new, old)) for p in _find_all(text, old)]
    norm_old = normalise(old, level)
    if not norm_old:
        return []
    norm = _Normalised(text, level)
    matches = []
    for pos in _find_all(norm.text, norm_old):
        start = norm.original(pos)
        end = norm.original(pos + len(norm_old) - 1) + 1
        matches.append(Match(start, end, _crlf_like(new, text[start:end])))
    return matches


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _common_indent(lines: list[str]) -> str:
    indents = [_indent(line) for line in lines if line.strip()]
    if not indents:
        return ""
    common = indents[0]
    for indent in indents[1:]:
        while not indent.startswith(common):
            common = common[:-1]
    return common


def _dedent(lines: list[str], indent: str) -> list[str]:
    return [line[len(indent) :] if line.strip() else "" for line in lines]


def _reindent(new: str, old_indent: str, file_indent: str) -> str:
    out = []
    for line in new.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            out.append(line)
            continue
        own = _indent(line)
        keep = 0
        while keep < min(len(own), len(old_indent)) and own[keep] == old_indent[keep]:
            keep += 1
        out.append(file_indent + line[keep:])
    return "\n".join(out)


def _indent_level(text: str, old: str, new: str) -> list[Match]:
    old_lines = normalise(old, 4).split("\n")
    trailing_newline = len(old_lines) > 1 and old_lines[-1] == ""
    if trailing_newline:
        old_lines.pop()
    if not any(line.strip() for line in old_lines):
        return []
    old_indent = _common_indent(old_lines)
    wanted = _dedent(old_lines, old_indent)
    anchor = next(i for i, line in enumerate(wanted) if line)
    # Line boundaries in the original text; levels 2-4 never add or remove
    # a line, so normalised line i is original line i.
    raw_lines = text.split("\n")
    norm_lines = [normalise(line, 4) for line in raw_lines]
    starts = [0]
    for line in raw_lines:
        starts.append(starts[-1] + len(line) + 1)
    n = len(wanted)
    matches: list[Match] = []
    i = 0
    while i + n <= len(raw_lines):
        if norm_lines[i + anchor].strip() != wanted[anchor].strip():
            i += 1
            continue
        window = norm_lines[i : i + n]
        file_indent = _common_indent(window)
        if _dedent(window, file_indent) != wanted:
            i += 1
            continue
        start = starts[i]
        last = raw_lines[i + n - 1]
        end = starts[i + n - 1] + len(last.removesuffix("\r"))
        if trailing_newline:
            end = starts[i + n - 1] + len(last) + (1 if i + n < len(raw_lines) else 0)
        replacement = _reindent(new, old_indent, file_indent)
        matches.append(Match(start, end, _crlf_like(replacement, text[start:end])))
        i += n
    return matches


def find(text: str, old: str, new: str) -> tuple[str, list[Match]]:
    """The first level at which ``old`` occurs, and its non-overlapping matches."""
    for number, level in enumerate(LEVELS, start=1):
        if number == 5:
            matches = _indent_level(text, old, new)
        else:
            matches = _char_level(text, old, new, number)
        if matches:
            return level, matches
    return "none", []

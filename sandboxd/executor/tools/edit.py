"""The ``edit`` tool: replace ``old_string`` with ``new_string`` in a file.

Matching levels and their notes live in ``matching``. Every error leaves the
file untouched. Line endings, BOM and mode are preserved; the write is
atomic like ``write``.

Fields:
  path          display path
  replacements  how many places were replaced
  first_line, last_line  lines of the (first) replaced region in the new file
  lines         first line of every replacement
  match_level   exact | crlf | unicode | trailing_whitespace | indentation
  created       True when an empty old_string created the file
"""

from __future__ import annotations

import difflib
import os
import re

from sandboxd.contract.tools import EDIT as SPEC

from . import matching
from .args import get_bool, get_str, parse
from .context import Context
from .fsio import open_regular, reason
from .paths import display, not_found, resolve
from .result import ToolError, ToolResult, ok
from .text import MAX_TEXT_BYTES, cat_n, count_lines, decode, encode, is_binary, plural, words
from .write import check_size, write_bytes

_CONTEXT = 3
_MAX_REGIONS = 3
_MAX_SNIPPET_LINES = 60
# Snippet lines are cut shorter than read's 2000 characters so that 60 of
# them always fit in the 30,000-character cap with room for the header.
_SNIPPET_LINE_CHARS = 400
# Fuzzy line search for the not-found hint is skipped on larger files: the
# hint is a courtesy and must not make an error slow.
_MAX_FUZZY_LINES = 5000
_LINE_PREFIX = re.compile(r"^\s*\d+(\t|→)")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _cut(line: str) -> str:
    return line if len(line) <= _SNIPPET_LINE_CHARS else line[:_SNIPPET_LINE_CHARS] + "…"


def _snippet(lines: list[str], regions: list[tuple[int, int]]) -> str:
    """cat -n excerpts around ``regions`` (1-based inclusive line ranges)."""
    spans: list[list[int]] = []
    for first, last in regions[:_MAX_REGIONS]:
        lo, hi = max(1, first - _CONTEXT), min(len(lines), last + _CONTEXT)
        if spans and lo <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], hi)
        else:
            spans.append([lo, hi])
    out: list[str] = []
    budget = _MAX_SNIPPET_LINES
    for lo, hi in spans:
        if budget <= 0:
            break
        if out:
            out.append("...")
        hi = min(hi, lo + budget - 1)
        for number in range(lo, hi + 1):
            line = lines[number - 1]
            out.append(cat_n(number, _cut(line)))
        budget -= hi - lo + 1
    return "\n".join(out)


def _candidates(lines: list[str], wanted: list[str]) -> list[int]:
    """Window starts worth scoring: where most of old_string's lines occur.

    Scoring every window with difflib is quadratic and far too slow for a
    large file; exact (stripped) line hits, or failing that the lines most
    like old_string's first line, find the few places worth a full ratio.
    """
    n = len(wanted)
    want = {line.strip() for line in wanted if line.strip()}
    hits = [1 if line.strip() in want else 0 for line in lines]
    scores: list[tuple[int, int]] = []
    window = sum(hits[:n])
    for i in range(max(1, len(lines) - n + 1)):
        if i:
            window += (hits[i + n - 1] if i + n - 1 < len(lines) else 0) - hits[i - 1]
        if window:
            scores.append((-window, i))
    if scores:
        return [i for _, i in sorted(scores)[:50]]
    if len(lines) > _MAX_FUZZY_LINES:
        return []
    stripped = [line.strip() for line in lines]
    found: list[int] = []
    body = [k for k, line in enumerate(wanted) if line.strip()]
    for k in {body[0], body[-1]} if body else ():
        close = set(difflib.get_close_matches(wanted[k].strip(), stripped, n=3, cutoff=0.6))
        found += [max(0, i - k) for i, line in enumerate(stripped) if line in close]
    return found[:10]


def _similar_region(text: str, old: str) -> str:
    """The window of the file most like ``old_string``, as a cat -n excerpt."""
    lines = text.split("\n")
    wanted = old.replace("\r\n", "\n").strip("\n")
    if not wanted.strip():
        return ""
    wanted_lines = wanted.split("\n")
    n = len(wanted_lines)
    best, best_at = 0.0, -1
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(wanted)
    for i in _candidates(lines, wanted_lines):
        matcher.set_seq1("\n".join(lines[i : i + n]))
        if matcher.quick_ratio() <= best:
            continue
        ratio = matcher.ratio()
        if ratio > best:
            best, best_at = ratio, i
    if best < 0.5:
        return ""
    first, last = best_at + 1, min(len(lines), best_at + n)
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    shown = range(first, min(last, first + _MAX_SNIPPET_LINES - 1) + 1)
    excerpt = "\n".join(cat_n(k, _cut(lines[k - 1])) for k in shown)
    return f"\nThe most similar region is at {where}:\n{excerpt}"


def _not_found(text: str, old: str, disp: str) -> ToolError:
    body = [line for line in old.split("\n") if line.strip()]
    if body and all(_LINE_PREFIX.match(line) for line in body):
        return ToolError(
            f"old_string carries line-number prefixes from read's output (like "
            f'"    12\\t"); they are not part of the file. Nothing was changed in {disp}. '
            f"Remove the number and the tab from the start of every line of old_string (and "
            f"new_string), then retry."
        )
    return ToolError(
        f"old_string was not found in {disp}. Nothing was changed."
        + _similar_region(text, old)
        + "\nCopy old_string exactly from the file (read it again if it may have changed), "
        "then retry."
    )


def _create(ctx: Context, path: str, target: str, new: str) -> ToolResult:
    disp = display(ctx.workdir, path)
    data = new.encode("utf-8", errors="replace")
    check_size(ctx, len(data), "new_string")
    write_bytes(ctx, path, target, data)
    lines = count_lines(new)
    return ok(
        f"Created {disp} ({plural(lines, 'line')}, {plural(len(data), 'byte')}).",
        path=disp,
        replacements=1,
        first_line=1,
        last_line=max(1, lines),
        lines=[1],
        match_level="exact",
        created=True,
    )


def run(ctx: Context, raw: dict[str, object]) -> ToolResult:
    args = parse(SPEC, raw)
    path = resolve(ctx.workdir, get_str(args, "file_path"))
    disp = display(ctx.workdir, path)
    old, new = get_str(args, "old_string"), get_str(args, "new_string")
    replace_all = get_bool(args, "replace_all")
    if old == new:
        raise ToolError(
            f"old_string and new_string are identical, so there is nothing to change in {disp}. "
            f"Put the changed text in new_string."
        )
    # Through a symlink: its file is written (and locked), not the link replaced.
    with ctx.path_locks.held_file(path) as target:
        if os.path.isdir(target):
            raise ToolError(f"{disp} is a directory, not a file. Give the path of a file in it.")
        if not os.path.exists(target):
            if old == "":
                return _create(ctx, path, target, new)
            raise ToolError(
                not_found(
                    ctx.workdir,
                    path,
                    "file",
                    "To create it, use write, or edit with an empty old_string.",
                )
            )
        try:
            if os.path.getsize(target) > MAX_TEXT_BYTES:
                raise ToolError(
                    f"{disp} is larger than {MAX_TEXT_BYTES // (1024 * 1024)} MiB, too large for "
                    f"edit. Change it with bash (e.g. sed -i)."
                )
            with open_regular(target) as fh:
                data = fh.read()
        except OSError as exc:
            raise ToolError(f"cannot read {disp}: {reason(exc)}. Nothing was changed.") from None
        if is_binary(data):
            raise ToolError(
                f"{disp} is a binary file (it contains NUL bytes); edit only changes text "
                f"files. Nothing was changed."
            )
        refused = ctx.read_state.check(path, disp, data, "edit")
        if refused:
            raise ToolError(refused)
        decoded = decode(data)
        text = decoded.text
        if old == "":
            if text:
                raise ToolError(
                    f"old_string is empty, but {disp} is not empty "
                    f"({plural(count_lines(text), 'line')}). An empty old_string only creates "
                    f"a missing file or fills an empty one. Give the exact text to replace."
                )
            level, found = "exact", [matching.Match(0, 0, new.replace("\r\n", "\n"))]
        else:
            level, found = matching.find(text, old, new)
        if not found:
            raise _not_found(text, old, disp)
        if len(found) > 1 and not replace_all:
            numbers = [str(_line_of(text, m.start)) for m in found]
            listed = ", ".join(numbers[:10])
            if len(numbers) > 10:
                listed += f", +{len(numbers) - 10} more"
            raise ToolError(
                f"old_string matches {len(found)} places in {disp} (lines {listed}). "
                f"Nothing was changed. To make it unique, add surrounding lines, "
                f"or set replace_all=true."
            )
        pieces: list[str] = []
        regions: list[tuple[int, int]] = []
        pos = 0
        line = 1
        for match in found:
            before = text[pos : match.start]
            pieces.append(before)
            line += before.count("\n")
            pieces.append(match.replacement)
            last = line + match.replacement.rstrip("\n").count("\n")
            regions.append((line, max(line, last)))
            line += match.replacement.count("\n")
            pos = match.end
        pieces.append(text[pos:])
        new_text = "".join(pieces)
        out = encode(new_text, bom=decoded.bom, crlf=decoded.crlf)
        check_size(ctx, len(out), "the edited file")
        write_bytes(ctx, path, target, out)
    first_lines = [str(first) for first, _ in regions]
    if len(regions) == 1:
        first, last = regions[0]
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        head = f"Edited {disp}: 1 replacement at {where}."
    else:
        shown = first_lines[:10] + ([f"{len(regions) - 10} more"] if len(regions) > 10 else [])
        head = f"Edited {disp}: {len(regions)} replacements at lines {words(shown)}."
    parts = [head]
    if level in matching.NOTES:
        parts.append(matching.NOTES[level])
    new_lines = new_text.replace("\r\n", "\n").split("\n")
    if new_lines and new_lines[-1] == "":
        new_lines.pop()  # the file's final newline does not start another line
    parts.append(_snippet(new_lines, regions))
    return ok(
        "\n".join(parts),
        path=disp,
        replacements=len(regions),
        first_line=regions[0][0],
        last_line=regions[0][1],
        lines=[first for first, _ in regions],
        match_level=level,
        created=False,
    )

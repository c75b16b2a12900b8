"""The ``grep`` tool: ripgrep semantics, with a pure-Python fallback.

The engine is ripgrep when ``rg`` is on PATH, else ``grep_py``; set
``SANDBOXD_GREP_ENGINE=python`` (or ``rg``), or the module variable
``ENGINE``, to choose. Both yield the same ``FileHits``; this module does
all the formatting and paging.

Fields:
  mode         files_with_matches | content | count
  total        entries the pages are cut from (files, or output lines)
  matches      matching lines (None in files_with_matches mode, which stops
               at each file's first match)
  files        display paths on this page (files_with_matches and count)
  file_count   files with a match
  truncated    more entries exist than shown
  next_offset  ``offset`` for the next page, or None
  timed_out    the search hit its time limit; results are partial
  engine       rg | python
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator

from sandboxd.contract.tools import GREP as SPEC

from . import grep_py, grep_rg
from .args import get_bool, get_int, get_opt_str, get_str, parse
from .context import Context
from .fsio import NotRegularFile, open_regular
from .glob import search_root
from .grep_model import FileHits, InvalidPattern, Query, SearchStopped, TooDeep
from .grep_types import ALIASES, TYPES
from .paths import display, place, shell_quote
from .read import MAX_LINE_CHARS
from .result import MAX_TEXT_CHARS, ToolError, ToolResult, ok
from .text import BINARY_SNIFF_BYTES, fit, is_binary, plural
from .walk import MAX_PATH_BYTES

#: "rg", "python" or None (decided per call: rg when it is on PATH).
ENGINE: str | None = None

_NOTICE_RESERVE = 800


def engine_name(forced: str | None = None) -> str:
    choice = forced or ENGINE or os.environ.get("SANDBOXD_GREP_ENGINE") or ""
    if choice in ("rg", "python"):
        return choice
    return "rg" if shutil.which("rg") else "python"


def _engine(
    q: Query, stop: Callable[[], bool], forced: str | None
) -> tuple[str, Iterator[FileHits]]:
    name = engine_name(forced)
    if name == "rg":
        rg = shutil.which("rg")
        if rg is not None:
            return name, grep_rg.search(rg, q, stop)
    return "python", grep_py.search(q, stop)


def _type_globs(name: str | None) -> tuple[str, ...]:
    if name is None:
        return ()
    key = ALIASES.get(name.lower(), name.lower())
    if key not in TYPES:
        raise ToolError(
            f'unknown file type "{name}". Known types: {", ".join(sorted(TYPES))}. '
            f'Or use glob instead, e.g. glob="*.ext".'
        )
    return TYPES[key]


def _query(ctx: Context, args: dict[str, object]) -> Query:
    pattern = get_str(args, "pattern")
    if pattern == "":
        raise ToolError('pattern is empty. Give a regex (e.g. "def main") or literal text.')
    root = search_root(ctx, get_opt_str(args, "path"), "grep", "path")
    try:
        mode = os.stat(root).st_mode
    except OSError:
        mode = stat.S_IFDIR  # vanished or unreadable: the engine reports it as a folder would
    is_file = stat.S_ISREG(mode)
    if not is_file and not stat.S_ISDIR(mode):
        raise ToolError(
            f"{display(ctx.workdir, root)} is not a regular file or a folder (a device, "
            f"socket or pipe); grep only searches files."
        )
    if is_file:
        try:
            with open_regular(root) as fh:
                binary = is_binary(fh.read(BINARY_SNIFF_BYTES))
        except NotRegularFile:
            raise ToolError(
                f"{display(ctx.workdir, root)} is not a regular file (a device, socket or "
                f"pipe); grep only searches files."
            ) from None
        except OSError:
            binary = False
        if binary:
            shown = shell_quote(display(ctx.workdir, root))
            raise ToolError(
                f"{display(ctx.workdir, root)} is a binary file (it contains NUL bytes), which "
                f"grep does not search. Use bash, e.g. strings {shown} | grep -n PATTERN."
            )
    context = get_int(args, "-C")
    return Query(
        pattern=pattern,
        workdir=ctx.workdir,
        root=root,
        root_is_file=is_file,
        glob=get_opt_str(args, "glob") or None,
        type_globs=_type_globs(get_opt_str(args, "type")),
        ignore_case=get_bool(args, "-i"),
        multiline=get_bool(args, "multiline"),
        literal=get_bool(args, "literal"),
        before=max(get_int(args, "-B"), context),
        after=max(get_int(args, "-A"), context),
        files_only=args["output_mode"] == "files_with_matches",
        # Only content mode pages the stream as it comes; the other two modes
        # put their entries in order here (``run``).
        ordered=args["output_mode"] == "content",
    )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + "…"


class _Pager:
    """Keeps only the entries of the requested page, counting all of them."""

    def __init__(self, offset: int, limit: int) -> None:
        self.offset, self.limit = offset, limit
        self.total = 0
        self.page: list[str] = []

    def add(self, entry: str) -> None:
        if self.offset <= self.total < self.offset + self.limit:
            self.page.append(entry)
        self.total += 1


def run(ctx: Context, raw: dict[str, object], cancel: threading.Event) -> ToolResult:
    args = parse(SPEC, raw)
    q = _query(ctx, args)
    mode = get_str(args, "output_mode")
    numbers = get_bool(args, "-n")
    context = q.before > 0 or q.after > 0
    offset, limit = get_int(args, "offset"), get_int(args, "head_limit")
    deadline = time.monotonic() + ctx.grep_time_limit
    timed_out = False
    too_deep = 0

    def stop() -> bool:
        return cancel.is_set() or time.monotonic() > deadline

    pager = _Pager(offset, limit)
    found: list[str] = []
    counted: list[tuple[tuple[bytes, ...] | None, str]] = []
    matches = 0
    previous: tuple[str, int] | None = None
    engine = engine_name(ctx.grep_engine)
    try:
        engine, results = _engine(q, stop, ctx.grep_engine)
        for file_hits in results:
            found.append(file_hits.path)
            file_matches = sum(1 for h in file_hits.hits if h.is_match)
            matches += file_matches
            if mode == "count":
                counted.append((file_hits.order, f"{file_hits.path}:{file_matches}"))
            elif mode == "content":
                for hit in file_hits.hits:
                    sep = ":" if hit.is_match else "-"
                    number = f"{hit.number}{sep}" if numbers else ""
                    line = f"{file_hits.path}{sep}{number}{_cut(hit.text)}"
                    gap = previous is not None and previous != (file_hits.path, hit.number - 1)
                    if context and gap and pager.offset < pager.total < pager.offset + limit:
                        line = "--\n" + line
                    pager.add(line)
                    previous = (file_hits.path, hit.number)
    except InvalidPattern as exc:
        raise ToolError(
            f'invalid regex "{q.pattern}": {exc}\nEscape special characters with a backslash '
            f"(e.g. \\( or \\.), or set literal=true to search for the text as written."
        ) from None
    except TooDeep as exc:
        too_deep = exc.count
    except SearchStopped:
        if cancel.is_set():
            raise ToolError("grep was cancelled.") from None
        timed_out = True
    where = place(ctx.workdir, q.root)
    filters = []
    if q.glob:
        filters.append(f'glob "{q.glob}"')
    if raw_type := get_opt_str(args, "type"):
        filters.append(f"type {raw_type}")
    scope = where + (f" ({', '.join(filters)})" if filters else "")
    limit_secs = f"{ctx.grep_time_limit:g} s"
    fields: dict[str, object] = {
        "mode": mode,
        "matches": None if mode == "files_with_matches" else matches,
        "file_count": len(found),
        "timed_out": timed_out,
        "engine": engine,
    }
    deep_notice = (
        f"[{plural(too_deep, 'folder')} lay deeper than the system's path length limit "
        f"({MAX_PATH_BYTES} bytes) and could not be searched, so these results are "
        f"incomplete. Search it with bash, e.g. (cd into the tree; grep -r PATTERN .).]"
    )
    if too_deep:
        fields["too_deep"] = too_deep
    if not found:
        if too_deep:
            return ToolResult(
                f'Error: no matches found for "{q.pattern}" in {scope}, but the search is '
                f"incomplete: {deep_notice[1:-1]}",
                True,
                dict(fields, total=0, files=[], truncated=True, next_offset=None),
            )
        if timed_out:
            return ToolResult(
                f'Error: the search for "{q.pattern}" in {scope} hit its {limit_secs} time limit '
                f"before finding any match, so it is incomplete: matches may exist. Narrow it "
                f"with path, glob or type.",
                True,
                dict(fields, total=0, files=[], truncated=True, next_offset=None),
            )
        return ok(
            f'No matches found for "{q.pattern}" in {scope}.',
            total=0,
            files=[],
            truncated=False,
            next_offset=None,
            **fields,
        )
    if mode == "count":
        if counted[0][0] is not None:
            # Path order, as a sorted search would have streamed them.
            counted.sort(key=lambda item: item[0] or ())
        for _, entry in counted:
            pager.add(entry)
    if mode == "files_with_matches":
        dated = []
        for path in found:
            try:
                mtime = os.stat(os.path.join(ctx.workdir, path)).st_mtime_ns
            except OSError:
                mtime = 0
            dated.append((-mtime, path))
        dated.sort()
        for _, path in dated:
            pager.add(path)
    noun = {"files_with_matches": "matching files", "content": "matching lines",
            "count": "files with matches"}[mode]  # fmt: skip
    page = pager.page
    page = page[: fit(page, MAX_TEXT_CHARS - _NOTICE_RESERVE)]
    if not page:
        raise ToolError(
            f"offset {offset} is past the end: there are {pager.total} {noun} for "
            f'"{q.pattern}" in {scope}. Use an offset below {pager.total}.'
        )
    end = offset + len(page)
    more = end < pager.total
    body = "\n".join(page)
    if mode == "count":
        body += f"\n\nTotal: {plural(matches, 'matching line')} in {plural(len(found), 'file')}."
    notices = []
    of = f"of {'at least ' if timed_out else ''}{pager.total}"
    span = str(len(page)) if offset == 0 else f"{offset + 1}-{end}"
    if more:
        notices.append(
            f"[Showing {span} {of} {noun}. Use offset={end} for the next page, or narrow "
            f"with path, glob or type.]"
        )
    if timed_out:
        notices.append(
            f"[The search hit its {limit_secs} time limit, so these results are incomplete. "
            f"Narrow it with path, glob or type.]"
        )
    if too_deep:
        notices.append(deep_notice)
    text = body + ("\n\n" + "\n".join(notices) if notices else "")
    return ok(
        text,
        total=pager.total,
        files=[e.rpartition(":")[0] for e in page]
        if mode == "count"
        else (page if mode == "files_with_matches" else None),
        truncated=more or timed_out or bool(too_deep),
        next_offset=end if more else None,
        **fields,
    )

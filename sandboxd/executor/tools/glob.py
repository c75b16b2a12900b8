"""The ``glob`` tool: files whose path matches a pattern, newest first.

A pattern with a ``/`` matches the path relative to ``path``; one without
matches the file name at any depth. Folders are walked by ``walk`` (.git
skipped, .gitignore honoured unless ``no_ignore``).

Fields:
  files        display paths on this page
  total        matching files (not counting ignored ones)
  truncated    more matching files exist than shown
  next_offset  ``offset`` for the next page, or None
  ignored      matching files hidden by .gitignore
  ignored_incomplete  the ignored count is a lower bound
"""

from __future__ import annotations

import os
import stat
import threading

from sandboxd.contract.tools import GLOB as SPEC

from .args import get_bool, get_int, get_opt_str, get_str, parse
from .context import Context
from .globpat import PatternError, compile_glob, has_magic
from .paths import display, not_found, place, resolve
from .result import MAX_TEXT_CHARS, ToolError, ToolResult, ok
from .text import fit, plural
from .walk import MAX_PATH_BYTES, Walk, WalkStopped

_MAX_IGNORED_WALK = 10_000


def split_absolute(pattern: str) -> tuple[str, str]:
    """``/a/b/*.py`` -> (``/a/b``, ``*.py``): the literal folder part becomes the root."""
    parts = pattern.split("/")
    index = 1
    while index < len(parts) - 1 and not has_magic(parts[index]):
        index += 1
    return "/".join(parts[:index]) or "/", "/".join(parts[index:])


def search_root(ctx: Context, raw_path: str | None, tool: str, what: str) -> str:
    """The file or folder a search starts in, or a model-facing error."""
    root = resolve(ctx.workdir, raw_path or ".", "path")
    if not os.path.exists(root):
        raise ToolError(
            not_found(ctx.workdir, root, what, f"Check the path, or run {tool} without path.")
        )
    return root


def run(ctx: Context, raw: dict[str, object], cancel: threading.Event) -> ToolResult:
    args = parse(SPEC, raw)
    pattern = get_str(args, "pattern")
    if not pattern.strip():
        raise ToolError('pattern is empty. Give a glob such as "**/*.py".')
    anchored = False
    raw_path = get_opt_str(args, "path")
    if pattern.startswith("/"):
        raw_path, pattern = split_absolute(pattern)
        anchored = True
    while pattern.startswith("./"):
        pattern, anchored = pattern[2:], True
    root = search_root(ctx, raw_path, "glob", "folder")
    where = place(ctx.workdir, root)
    if not os.path.isdir(root):
        raise ToolError(
            f"path {display(ctx.workdir, root)} is a file, not a folder; glob searches "
            f"folders. Give its folder as path, or use read or grep on the file."
        )
    try:
        matcher = compile_glob(pattern)
    except PatternError as exc:
        raise ToolError(
            f'invalid glob pattern "{pattern}": {exc}. Escape a literal [ or {{ with a '
            f"backslash, or fix the brackets."
        ) from None
    anchored = anchored or "/" in pattern
    no_ignore = get_bool(args, "no_ignore")
    # Ignored folders (node_modules...) are walked only so far: enough to
    # count what .gitignore hid, without paying for all of it on every call.
    walker = Walk(
        root,
        respect_ignore=not no_ignore,
        include_ignored=True,
        max_ignored=_MAX_IGNORED_WALK,
        stop=cancel.is_set,
    )
    found: list[tuple[int, str]] = []
    ignored = 0
    try:
        for entry in walker:
            if not matcher.match(entry.rel if anchored else entry.name):
                continue
            try:
                st = os.stat(entry.path)  # follows a symlink to its file
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if entry.ignored:
                ignored += 1
            else:
                found.append((-st.st_mtime_ns, display(ctx.workdir, entry.path)))
    except WalkStopped:
        raise ToolError("glob was cancelled.") from None
    found.sort()
    total = len(found)
    offset, limit = get_int(args, "offset"), get_int(args, "head_limit")
    hidden = ""
    if ignored:
        count = f"at least {ignored}" if walker.ignored_incomplete else str(ignored)
        verb = "is" if ignored == 1 and not walker.ignored_incomplete else "are"
        noun = "file" if ignored == 1 else "files"
        hidden = (
            f"[{count} more matching {noun} {verb} ignored by .gitignore. "
            f"Use no_ignore=true to include them.]"
        )
    fields: dict[str, object] = {
        "total": total,
        "ignored": ignored,
        "ignored_incomplete": walker.ignored_incomplete,
    }
    deep = ""
    if walker.too_deep:
        fields["too_deep"] = walker.too_deep
        deep = (
            f"[{plural(walker.too_deep, 'folder')} lay deeper than the system's path length "
            f"limit ({MAX_PATH_BYTES} bytes) and could not be listed, so this list is "
            f"incomplete. Look inside with bash (cd into the tree, then find . -name ...).]"
        )
        hidden = hidden + ("\n" if hidden else "") + deep
    if total == 0:
        if deep:
            raise ToolError(
                f'no files found matching "{pattern}" in {where}, but the search is '
                f"incomplete: {deep[1:-1]}",
                **fields,
            )
        text = f'No files found matching "{pattern}" in {where}.'
        return ok(
            text + ("\n\n" + hidden if hidden else ""),
            files=[],
            truncated=False,
            next_offset=None,
            **fields,
        )
    if offset >= total:
        raise ToolError(
            f"offset {offset} is past the end: {plural(total, 'file')} match "
            f'"{pattern}" in {where}. Use an offset below {total}.'
        )
    page = [p for _, p in found[offset : offset + limit]]
    page = page[: fit(page, MAX_TEXT_CHARS - 600)]
    end = offset + len(page)
    notices = []
    if end < total:
        span = f"{len(page)}" if offset == 0 else f"files {offset + 1}-{end}"
        notices.append(
            f"[Showing {span} of {total} matching files, newest first. Use offset={end} "
            f"for the next page, or narrow the pattern.]"
        )
    elif offset:
        notices.append(
            f"[Showing files {offset + 1}-{end} of {total} matching files, newest first; "
            f"this is the last page.]"
        )
    if hidden:
        notices.append(hidden)
    text = "\n".join(page) + ("\n\n" + "\n".join(notices) if notices else "")
    return ok(
        text,
        files=page,
        truncated=end < total,
        next_offset=end if end < total else None,
        **fields,
    )

"""The ``write`` tool: create or overwrite a file, atomically.

Overwriting keeps the file's mode, BOM and CRLF line endings (a file read as
LF and written back stays CRLF), and is refused unless this instance knows
the file's current content (see readstate).

Fields:
  path            display path
  created         True for a new file
  lines, bytes    of the written file
  previous_lines  lines before an overwrite, None when created
"""

from __future__ import annotations

import os

from sandboxd.contract.tools import WRITE as SPEC

from .args import get_str, parse
from .context import Context
from .fsio import atomic_write, make_parents, open_regular, reason
from .paths import display, resolve
from .result import ToolError, ToolResult, ok
from .text import MAX_TEXT_BYTES, count_lines, decode, encode, plural


def _count_lines_streamed(path: str) -> int:
    count = 0
    last = b"\n"
    with open_regular(path) as fh:
        while chunk := fh.read(1024 * 1024):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (0 if last == b"\n" else 1)


def _mib(size: int) -> str:
    mib = 1024 * 1024
    return f" ({size // mib} MiB)" if size % mib == 0 else ""


def check_size(ctx: Context, size: int, what: str) -> None:
    limit = ctx.max_write_bytes
    if size > limit:
        raise ToolError(
            f"{what} is {size} bytes, over the limit of {limit} bytes{_mib(limit)}. Nothing "
            f"was written. Write the file in "
            f"parts (write, then bash 'cat part2 >> file'), or generate it with bash."
        )


def write_bytes(ctx: Context, path: str, target: str, data: bytes) -> None:
    """Create parents, replace atomically, and record the new content as known."""
    disp = display(ctx.workdir, path)
    try:
        make_parents(target)
        atomic_write(target, data)
    except FileExistsError:
        raise ToolError(
            f"cannot create the parent folders of {disp}: a part of that path is a file. "
            f"Choose another path."
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot write {disp}: {reason(exc)}. Nothing was written.") from None
    ctx.read_state.record(path, data)


def run(ctx: Context, raw: dict[str, object]) -> ToolResult:
    args = parse(SPEC, raw)
    path = resolve(ctx.workdir, get_str(args, "file_path"))
    disp = display(ctx.workdir, path)
    content = get_str(args, "content")
    check_size(ctx, len(content.encode("utf-8", errors="replace")), "content")
    # Through a symlink: its file is written (and locked), not the link replaced.
    with ctx.path_locks.held_file(path) as target:
        if os.path.isdir(target):
            raise ToolError(
                f"{disp} is a directory, so it cannot be written as a file. Give a file "
                f"path, e.g. {disp.rstrip('/')}/name.txt."
            )
        previous: int | None = None
        try:
            size = os.path.getsize(target)
        except OSError:
            size = -1
        if size < 0:
            data = content.encode("utf-8", errors="replace")
        else:
            try:
                current = None
                if size <= MAX_TEXT_BYTES:
                    with open_regular(target) as fh:
                        current = fh.read()
            except OSError as exc:
                raise ToolError(f"cannot read the existing {disp}: {reason(exc)}.") from None
            refused = ctx.read_state.check(path, disp, current, "write")
            if refused:
                raise ToolError(refused)
            if current is not None:
                old = decode(current)
                previous = count_lines(old.text)
                data = encode(
                    content,
                    bom=old.bom and not content.startswith("\ufeff"),
                    crlf=old.crlf and "\r\n" not in content,
                )
            else:
                previous = _count_lines_streamed(target)
                data = content.encode("utf-8", errors="replace")
            check_size(ctx, len(data), "content")
        write_bytes(ctx, path, target, data)
    lines = count_lines(content)
    size_text = f"{plural(lines, 'line')}, {plural(len(data), 'byte')}"
    if previous is None:
        text = f"Created {disp} ({size_text})."
    else:
        text = f"Overwrote {disp} ({size_text}; previously {plural(previous, 'line')})."
    return ok(
        text,
        path=disp,
        created=previous is None,
        lines=lines,
        bytes=len(data),
        previous_lines=previous,
    )

"""The ``read`` tool: one page of a text file in ``cat -n`` format.

Fields:
  path         display path of the file
  total_lines  lines in the file (None for files over 16 MiB, which are
               never scanned whole unless the page reaches their end)
  start_line, end_line  the lines shown (0, 0 for an empty file)
  truncated    more of the file exists than was shown
  next_offset  ``offset`` for the next page, or None
  cut_lines    numbers of the lines cut at 2000 characters
"""

from __future__ import annotations

import io
import itertools
import os
import stat
import time
from collections.abc import Iterator
from typing import BinaryIO

from sandboxd.contract.tools import READ as SPEC

from .args import get_int, get_str, parse
from .context import Context
from .fsio import NotRegularFile, open_regular
from .paths import display, list_entries, not_found, resolve, shell_quote
from .result import MAX_TEXT_CHARS, ToolError, ToolResult, ok
from .text import BINARY_SNIFF_BYTES, BOM, MAX_TEXT_BYTES, cat_n, is_binary, words

MAX_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_OUTPUT_BYTES = 50 * 1024
# Room kept under the 30,000-character cap for the notices after the lines.
_NOTICE_RESERVE = 700
#: Lines read between two pauses of a long read (see ``_lines``).
_LINES_PER_PAUSE = 10_000
# A UTF-8 character is at most 4 bytes: reading this much of a line is
# always enough to show its first MAX_LINE_CHARS characters.
_LINE_READ_BYTES = MAX_LINE_CHARS * 4 + 4


def _lines(fh: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """Lines without their newline, each at most ``_LINE_READ_BYTES`` long.

    The flag says the line was longer and its tail was skipped unread into
    memory, so one giant line cannot blow up a read.
    """
    for count in itertools.count(1):
        if count % _LINES_PER_PAUSE == 0:
            # Let the executor's other threads have the GIL. A thread that
            # runs Python without blocking keeps it from one that makes
            # system calls for far longer than the switch interval: in a
            # container, a quick read's four calls took 0.1-1.1 s while
            # another call went through a 30-million-line file; with this
            # pause every 10,000 lines, about 1 ms.
            time.sleep(0)
        line = fh.readline(_LINE_READ_BYTES)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1], False
            continue
        long_line = len(line) == _LINE_READ_BYTES
        while long_line:
            rest = fh.readline(1024 * 1024)
            if not rest or rest.endswith(b"\n"):
                break
        yield line, long_line


def _stat_target(ctx: Context, path: str) -> os.stat_result:
    disp = display(ctx.workdir, path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(
            not_found(ctx.workdir, path, "file", "Check the path, or find the file with glob.")
        ) from None
    except PermissionError:
        raise ToolError(
            f"permission denied: cannot access {disp}. Check its permissions with bash "
            f"(ls -l {shell_quote(disp)})."
        ) from None
    if stat.S_ISDIR(st.st_mode):
        shown, total = list_entries(path, 50)
        listing = "\n".join(shown) if shown else "(empty folder)"
        more = f"\n[... and {total - len(shown)} more entries]" if total > len(shown) else ""
        raise ToolError(
            f"{disp} is a directory, not a file. Read one of the files in it, or list it "
            f"with glob. Its first {min(total, 50)} entries:\n{listing}{more}",
            total_entries=total,
        )
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(
            f"{disp} is not a regular file (a device, socket or pipe); read only reads "
            f"files. Inspect it with bash (ls -l {shell_quote(disp)})."
        )
    return st


def _cut_notice(cut: list[int], disp: str) -> str:
    shown = [str(n) for n in cut[:5]]
    if len(cut) > 5:
        shown.append(f"{len(cut) - 5} more")
    subject = f"Line {shown[0]} is" if len(cut) == 1 else f"Lines {words(shown)} are"
    verb = "was" if len(cut) == 1 else "were"
    return (
        f"[{subject} longer than {MAX_LINE_CHARS} characters and {verb} cut. Use bash "
        f"(e.g. sed -n '{cut[0]}p' {shell_quote(disp)} | cut -c{MAX_LINE_CHARS + 1}-"
        f"{MAX_LINE_CHARS * 2}) to see the rest.]"
    )


def run(ctx: Context, raw: dict[str, object]) -> ToolResult:
    args = parse(SPEC, raw)
    path = resolve(ctx.workdir, get_str(args, "file_path"))
    disp = display(ctx.workdir, path)
    offset = max(1, get_int(args, "offset"))
    limit = min(get_int(args, "limit"), MAX_LINES)
    st = _stat_target(ctx, path)
    try:
        fh = open_regular(path)  # closed in the finally below
    except (NotRegularFile, IsADirectoryError):
        # Swapped since the check above: answer as if seen then.
        raise ToolError(
            f"{disp} is not a regular file (a device, socket or pipe); read only reads "
            f"files. Inspect it with bash (ls -l {shell_quote(disp)})."
        ) from None
    except PermissionError:
        raise ToolError(
            f"permission denied: cannot read {disp}. Check its permissions with bash "
            f"(ls -l {shell_quote(disp)})."
        ) from None
    try:
        head = fh.read(BINARY_SNIFF_BYTES)
        if is_binary(head):
            quoted = shell_quote(disp)
            raise ToolError(
                f"{disp} is a binary file ({st.st_size} bytes; it contains NUL bytes), "
                f"so read cannot show it as text. Inspect it with bash, e.g. file {quoted} "
                f"or xxd {quoted} | head -50."
            )
        total: int | None
        if st.st_size <= MAX_TEXT_BYTES:
            data = head + fh.read()
            ctx.read_state.record(path, data)
            if data in (b"", BOM):
                return ok(
                    "[File is empty.]",
                    path=disp,
                    total_lines=0,
                    start_line=0,
                    end_line=0,
                    truncated=False,
                    next_offset=None,
                    cut_lines=[],
                )
            total = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
            source: BinaryIO = io.BytesIO(data)
        else:
            ctx.read_state.record_streamed(path)
            total = None
            fh.seek(0)
            source = fh
        return _page(source, disp, offset, limit, total)
    finally:
        fh.close()


def _page(source: BinaryIO, disp: str, offset: int, limit: int, total: int | None) -> ToolResult:
    if total is not None and offset > total:
        raise ToolError(f"offset {offset} is past the end of {disp}, which has {total} lines.")
    lines = _lines(source)
    number = 0
    for _ in range(offset - 1):
        if next(lines, None) is None:
            # Only a file too large to count gets here: now we know its size.
            raise ToolError(f"offset {offset} is past the end of {disp}, which has {number} lines.")
        number += 1
    out: list[str] = []
    cut: list[int] = []
    used_bytes = used_chars = 0
    budget_hit = ""
    more = False
    for raw_line, skipped in lines:
        if len(out) == limit:
            more = True
            break
        number += 1
        text = raw_line.decode("utf-8", errors="replace")
        if number == 1:
            text = text.removeprefix("\ufeff")
        if text.endswith("\r"):
            text = text[:-1]
        if skipped or len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + "…"
            cut.append(number)
        formatted = cat_n(number, text)
        size = len(formatted.encode("utf-8")) + 1
        if used_bytes + size > MAX_OUTPUT_BYTES:
            budget_hit = "50 KiB"
        elif used_chars + len(formatted) + 1 > MAX_TEXT_CHARS - _NOTICE_RESERVE:
            budget_hit = "30,000 characters"
        if budget_hit:
            number -= 1
            if cut and cut[-1] == number + 1:
                cut.pop()
            more = True
            break
        out.append(formatted)
        used_bytes += size
        used_chars += len(formatted) + 1
    if total is None and not more:
        total = number  # the page reached the end of the file
    end = offset + len(out) - 1
    of = f"of {total}" if total is not None else "of a file too large to count its lines"
    notices = []
    if cut:
        notices.append(_cut_notice(cut, disp))
    if budget_hit:
        notices.append(
            f"[Output limit of {budget_hit} reached: showing lines {offset}-{end} {of}. "
            f"Use offset={end + 1} to read more.]"
        )
    elif more:
        notices.append(f"[Showing lines {offset}-{end} {of}. Use offset={end + 1} to read more.]")
    text = "\n".join(out)
    if notices:
        text += "\n\n" + "\n".join(notices)
    return ok(
        text,
        path=disp,
        total_lines=total,
        start_line=offset,
        end_line=end,
        truncated=more,
        next_offset=end + 1 if more else None,
        cut_lines=cut,
    )

"""grep engine: ripgrep with ``--json``, for exact structured results.

Everything ripgrep would pick up from its surroundings is switched off
(config file, .ignore/.rgignore, global and .git/info excludes) so that it
sees the same files as the Python engine; ``type`` arrives as globs from the
shared table.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import select
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import IO

from ..spawn import spawn
from .grep_model import (
    FileHits,
    Hit,
    InvalidPattern,
    Query,
    SearchStopped,
    TooDeep,
    path_order,
)
from .paths import display


def _raw(obj: dict[str, object]) -> bytes:
    if "text" in obj:
        return str(obj["text"]).encode("utf-8", "surrogateescape")
    return base64.b64decode(str(obj.get("bytes", "")))


def _text(obj: dict[str, object]) -> str:
    if "text" in obj:
        return str(obj["text"])
    return _raw(obj).decode("utf-8", errors="replace")


def command(rg: str, q: Query) -> list[str]:
    # files_with_matches needs the names only: ripgrep's own list (-l),
    # NUL-terminated, is what its --json stream would say about them (the
    # same files, binary ones left out alike) at a fraction of the bytes
    # to read and parse.
    output = ["-l", "--null"] if q.files_only else ["--json"]
    cmd = [
        rg, *output, "--no-config", "--hidden", "--no-require-git", "--no-ignore-dot",
        "--no-ignore-exclude", "--no-ignore-global", "--crlf", "-g", "!.git",
    ]  # fmt: skip
    if q.ordered:
        # Sorting makes ripgrep search one file at a time: asked only where
        # the stream's order is the result's (content mode's pages).
        cmd += ["--sort", "path"]
    if q.ignore_case:
        cmd.append("-i")
    if q.multiline:
        cmd += ["-U", "--multiline-dotall"]
    if q.literal:
        cmd.append("-F")
    if not q.files_only:
        cmd += ["-B", str(q.before), "-A", str(q.after)]
    if q.glob:
        cmd += ["-g", q.glob]
    if q.type_globs:
        for pattern in q.type_globs:
            cmd += ["--type-add", f"sandboxd:{pattern}"]
        cmd += ["-t", "sandboxd"]
    cmd += ["-e", q.pattern]
    if q.root != q.workdir:
        cmd += ["--", display(q.workdir, q.root)]
    return cmd


def _lines(
    proc: subprocess.Popen[bytes], stop: Callable[[], bool], end: bytes = b"\n"
) -> Iterator[bytes]:
    """stdout records ending in ``end``, checking ``stop`` while ripgrep is quiet."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    pending = b""
    while True:
        if stop():
            raise SearchStopped
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if pending:
                yield pending
            return
        pending += chunk
        *complete, pending = pending.split(end)
        yield from complete


_PATH_ERROR = re.compile(rb"\(os error (\d+)\)\s*$")
_ENAMETOOLONG = b"36"
#: ripgrep's advice when a filter left nothing to search: not an error here.
_ADVICE = (b"No files were searched", b"Running with --debug")


class _Errors:
    """ripgrep's stderr, read to the end so it can never block on a full pipe.

    Lines about a path ("...: Permission denied (os error 13)") are counted,
    the rest (a regex error) kept, bounded, as the message.
    """

    def __init__(self) -> None:
        self.other: list[bytes] = []
        self.kept = 0
        self.too_long = 0

    def drain(self, stream: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in stream:
                found = _PATH_ERROR.search(line)
                if found is not None:
                    self.too_long += found.group(1) == _ENAMETOOLONG
                elif line.startswith(_ADVICE):
                    continue
                elif self.kept < 1 << 16:
                    self.other.append(line)
                    self.kept += len(line)

    def message(self) -> str:
        return b"".join(self.other).decode("utf-8", errors="replace").strip()


def search(rg: str, q: Query, stop: Callable[[], bool]) -> Iterator[FileHits]:
    # Same session as the executor: rg is stopped through its pipe, not a group kill.
    # It starts no process (--no-config; no --pre, no -z decompressors), so its
    # OOM score may come after the spawn (executor.oomscore).
    proc = spawn(command(rg, q), cwd=q.workdir, new_session=False, score_after=True)
    errors = _Errors()
    assert proc.stderr is not None
    stderr = proc.stderr
    drain = threading.Thread(target=errors.drain, args=(stderr,), daemon=True)
    drain.start()
    try:
        if q.files_only:
            yield from _listed(proc, q, stop)
        else:
            yield from _hits(proc, q, stop)
        proc.wait()
        drain.join(1)
        if proc.returncode == 2 and errors.other:
            raise InvalidPattern(errors.message())
        if errors.too_long:
            raise TooDeep(errors.too_long)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _found(q: Query, raw: bytes, ordered: bool) -> FileHits:
    """A file ripgrep named (its path as ripgrep printed it), no hits yet."""
    path = os.path.normpath(os.path.join(q.workdir, raw.decode("utf-8", errors="replace")))
    return FileHits(display(q.workdir, path), [], None if ordered else path_order(raw))


def _listed(
    proc: subprocess.Popen[bytes], q: Query, stop: Callable[[], bool]
) -> Iterator[FileHits]:
    """``-l --null``: one NUL-terminated path per file with a match (no lines)."""
    for raw in _lines(proc, stop, b"\0"):
        if raw:
            yield _found(q, raw, q.ordered)


def _hits(proc: subprocess.Popen[bytes], q: Query, stop: Callable[[], bool]) -> Iterator[FileHits]:
    """``--json``: a file's begin, its match and context lines, its end."""
    current: dict[int, Hit] = {}
    for line in _lines(proc, stop):
        if not line.strip():
            continue
        message = json.loads(line)
        kind, data = message.get("type"), message.get("data", {})
        if kind == "begin":
            current = {}
        elif kind in ("match", "context"):
            number = int(data["line_number"])
            text = _text(data["lines"])
            if text.endswith("\n"):
                text = text[:-1]
            for offset, part in enumerate(text.split("\n")):
                hit = Hit(number + offset, part.removesuffix("\r"), kind == "match")
                known = current.get(hit.number)
                if known is None or (hit.is_match and not known.is_match):
                    current[hit.number] = hit
        elif kind == "end":
            binary = data.get("binary_offset") is not None and not q.root_is_file
            if current and not binary:
                found = _found(q, _raw(data["path"]), q.ordered)
                found.hits.extend(current[k] for k in sorted(current))
                yield found
            current = {}

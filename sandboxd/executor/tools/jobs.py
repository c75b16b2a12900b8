"""Background jobs of the bash tool, and the ``bash_output`` / ``kill_shell`` tools.

A job writes its merged output straight into its log file (the executor
holds no pipe for it, so a job that floods costs disk, capped by the
workspace's disk limit, never executor memory). ``bash_output`` reads the
log from the job's read offset onwards in bounded chunks, cleans it as the
bash tool does, keeps a head and a tail within the 30,000-character cap,
and moves the offset to the end. Finished jobs stay known (newest
``KEEP_FINISHED``) so their last output and exit can still be read.

Fields of ``bash_output``: bash_id, status (running | exited | killed),
exit_code (None while running; 128+S when killed by signal S), signal,
new_bytes (log bytes consumed by this call), truncated, log_path.
Fields of ``kill_shell``: bash_id, pid, status, exit_code, signal, killed
(False when the job had already ended).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import BinaryIO

from sandboxd.contract.tools import BASH_OUTPUT as OUTPUT_SPEC
from sandboxd.contract.tools import KILL_SHELL as KILL_SPEC

from .args import get_opt_str, get_str, parse
from .output import Capture, Cleaner
from .paths import display
from .result import MAX_TEXT_CHARS, ToolError, ToolResult

#: Finished jobs remembered beyond the running ones (oldest forgotten first).
KEEP_FINISHED = 64
#: Seconds between SIGTERM and SIGKILL for ``kill_shell``.
KILL_GRACE = 2.0
_CHUNK = 1 << 16
_ID = re.compile(r"(?:bash_)?(\d{1,9})")


@dataclass
class Job:
    number: int
    proc: subprocess.Popen[bytes]
    log_path: str
    command: str
    offset: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def bash_id(self) -> str:
        return f"bash_{self.number}"

    def state(self) -> tuple[str, int | None, int | None]:
        """(status, exit_code, signal); polling also reaps a finished job."""
        code = self.proc.poll()
        if code is None:
            return "running", None, None
        if code < 0:
            return "killed", 128 - code, -code
        return "exited", code, None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe(status: str, code: int | None, sig: int | None) -> str:
    if status == "running":
        return "running"
    if status == "killed" and sig is not None:
        return f"killed by signal {sig} ({_signal_name(sig)})"
    return f"exited (Exit code: {code})"


def _short(status: str, code: int | None, sig: int | None) -> str:
    if status == "running":
        return "running"
    if status == "killed" and sig is not None:
        return f"killed by {_signal_name(sig)}"
    return f"exit code {code}"


def _signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Jobs:
    """The background jobs of one instance's shell."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self._jobs: dict[int, Job] = {}
        self._lock = threading.Lock()

    def add(self, job: Job) -> None:
        with self._lock:
            self._jobs[job.number] = job
            finished = [n for n, j in self._jobs.items() if j.proc.poll() is not None]
            for number in finished[: max(0, len(finished) - KEEP_FINISHED)]:
                del self._jobs[number]

    def reap(self) -> None:
        """Collect finished jobs' exit statuses so none lingers as a zombie."""
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.proc.poll()

    def _get(self, raw: str, param: str) -> Job:
        match = _ID.fullmatch(raw.strip())
        with self._lock:
            job = self._jobs.get(int(match.group(1))) if match else None
            known = list(self._jobs.values())
        if job is not None:
            return job
        if not known:
            listing = (
                "There are no background jobs; start one with bash and run_in_background=true."
            )
        else:
            parts = [f"{other.bash_id} ({_short(*other.state())})" for other in known]
            listing = "The jobs are: " + ", ".join(parts) + "."
        raise ToolError(f"no background job {raw!r} ({param}). {listing}")

    # ------------------------------------------------------------ bash_output

    def output(self, raw: dict[str, object]) -> ToolResult:
        args = parse(OUTPUT_SPEC, raw)
        pattern = get_opt_str(args, "filter")
        regex: re.Pattern[str] | None = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise ToolError(
                    f"filter {pattern!r} is not a valid regular expression: {exc}. Escape "
                    "special characters (e.g. \\( or \\.), or leave filter out."
                ) from exc
        job = self._get(get_str(args, "bash_id"), "bash_id")
        with job.lock:
            # The state is taken before reading, so "exited" always comes
            # with every byte the job wrote.
            status, code, sig = job.state()
            capture = Capture(None, 0)
            new_bytes, notes = self._read_new(job, capture, regex, final=status != "running")
        shown_log = display(self.workdir, job.log_path)
        lines = ["", f"Status: {describe(status, code, sig)}"]
        lines.extend(notes)
        notice = (
            f"[Output truncated: {capture.total_chars} characters, shown as the first 20% and "
            f"the last 80%. The full output is saved in {shown_log}: read it with read or grep.]"
        )
        room = MAX_TEXT_CHARS - len("\n".join(lines)) - 1
        text, truncated = capture.render(room)
        if truncated:
            text, _ = capture.render(room - len(notice) - 1)
            lines.append(notice)
        if not text:
            text = (
                "(no new output)"
                if regex is None or not new_bytes
                else (f"(no new lines match the filter {pattern!r})")
            )
        lines.insert(0, text)
        return ToolResult(
            "\n".join(lines),
            False,
            {
                "bash_id": job.bash_id,
                "status": status,
                "exit_code": code,
                "signal": sig,
                "new_bytes": new_bytes,
                "truncated": truncated,
                "log_path": shown_log,
            },
        )

    @staticmethod
    def _read_new(
        job: Job, capture: Capture, regex: re.Pattern[str] | None, *, final: bool
    ) -> tuple[int, list[str]]:
        """Feed the log from the job's offset into ``capture``; (bytes consumed, notes)."""
        notes: list[str] = []
        try:
            fh = open(job.log_path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return 0, [f"[The log {job.log_path} was removed; the job's output is lost.]"]
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if size < job.offset:
                notes.append("[The log was truncated since the last read; reading from its start.]")
                job.offset = 0
            if not final:
                # A running job may be mid-way through a UTF-8 character:
                # leave an unfinished one for the next read.
                size -= _incomplete_tail(fh, size)
            fh.seek(job.offset)
            cleaner = Cleaner()
            pending = ""
            consumed = 0
            while job.offset + consumed < size:
                chunk = fh.read(min(_CHUNK, size - job.offset - consumed))
                if not chunk:
                    break
                consumed += len(chunk)
                text = cleaner.feed(chunk)
                if regex is None:
                    capture.add(text)
                    continue
                pending += text
                cut = pending.rfind("\n") + 1
                if not cut and len(pending) > _CHUNK:
                    cut = len(pending)  # a line that never ends is judged in pieces
                _add_matching(capture, regex, pending[:cut])
                pending = pending[cut:]
            tail = cleaner.feed(b"", final=True)
            if regex is None:
                capture.add(tail)
            else:
                _add_matching(capture, regex, pending + tail)
            job.offset += consumed
        return consumed, notes

    # ------------------------------------------------------------ kill_shell

    def kill(self, raw: dict[str, object]) -> ToolResult:
        args = parse(KILL_SPEC, raw)
        job = self._get(get_str(args, "shell_id"), "shell_id")
        pid = job.proc.pid
        status, code, sig = job.state()
        killed = False
        if status == "running":
            _signal_group(pid, signal.SIGTERM)
            try:
                job.proc.wait(KILL_GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(pid, signal.SIGKILL)
                job.proc.wait()
            # Children that outlived the leader's exit on SIGTERM go too.
            _signal_group(pid, signal.SIGKILL)
            killed = True
            status, code, sig = job.state()
            text = f"Killed {job.bash_id} (pid {pid})."
        else:
            # The leader is gone; what it left behind in its group goes now.
            leftovers = _signal_group(pid, signal.SIGKILL)
            text = (
                f"{job.bash_id} (pid {pid}) had already ended: {describe(status, code, sig)}. "
                "Nothing to kill"
                + ("; its remaining processes were stopped." if leftovers else ".")
            )
        return ToolResult(
            text,
            False,
            {
                "bash_id": job.bash_id,
                "pid": pid,
                "status": status,
                "exit_code": code,
                "signal": sig,
                "killed": killed,
            },
        )

    def close(self) -> None:
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.proc.poll() is None]
            self._jobs.clear()
        for job in jobs:
            _signal_group(job.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE
        for job in jobs:
            try:
                job.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(job.proc.pid, signal.SIGKILL)
                job.proc.wait()


def _add_matching(capture: Capture, regex: re.Pattern[str], text: str) -> None:
    if not text:
        return
    kept = [line for line in text.splitlines(keepends=True) if regex.search(line)]
    if kept:
        capture.add("".join(kept))


def _incomplete_tail(fh: BinaryIO, end: int) -> int:
    """Bytes at the end of the log (up to ``end``) that start an unfinished UTF-8 character."""
    start = max(0, end - 3)
    fh.seek(start)
    data = fh.read(end - start)
    for back in range(1, len(data) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead
        if byte & 0x80 == 0:
            return 0
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return back if back < need else 0
    return 0

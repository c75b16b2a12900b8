"""The ``bash`` tool: one fresh ``bash -c`` per call, with persistent state.

Each call runs an inline wrapper in its own process group (stdin
/dev/null), started by the executor in the instance's saved working
directory with its saved exported environment; it runs the command with
``eval`` and on exit (an EXIT trap, which bash also runs on SIGTERM) reports
``$PWD`` and the exported variables as data on an inherited descriptor. The
executor keeps that state in memory; nothing is read back from a file the
workload could rewrite. Output is merged stdout+stderr, cleaned
and bounded while it streams (``output``); the full cleaned output is
logged to ``{state_dir}/logs/bash-<n>.log`` and kept only when the text was
truncated. A command that replaces the shell (``exec``) or installs its
own EXIT trap does not save its state.

Fields:
  exit_code    the exit status (124 on timeout; None for background jobs)
  timed_out    the timeout stopped the command
  cancelled    the caller gave up and the command was stopped
  duration_ms  wall time of the call
  truncated    the text shows a head and tail of the output only
  log_path     the full log (display path) when truncated, else None;
               the job's log for background jobs
  background   True for run_in_background
  job_id, pid  background job number and process id (None otherwise)
  bash_id      the job's id for bash_output and kill_shell ("bash_<job_id>")
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import BinaryIO

from sandboxd.contract.tools import BASH as SPEC
from sandboxd.contract.tools import BASH_MAX_TIMEOUT_MS, BASH_MIN_TIMEOUT_MS

from .. import identity, logs
from ..spawn import spawn
from . import bashstate
from .args import get_bool, get_int, get_opt_str, get_str, parse
from .jobs import Job, Jobs
from .locks import FifoLock
from .output import Capture, Cleaner
from .paths import display, not_found, resolve
from .result import MAX_TEXT_CHARS, ToolError, ToolResult

LOG_CAP_BYTES = 64 * 1024 * 1024
#: Seconds between SIGTERM and SIGKILL.
KILL_GRACE = 2.0
#: After the shell exits, stop reading once the pipe is quiet this long, or
#: after DRAIN_MAX in all: background children may hold it open forever.
DRAIN_IDLE = 0.2
DRAIN_MAX = 2.0

BASE_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb"}

# The per-call script is one line, passed inline (never read from a file the
# workload could rewrite), so that bash reports errors in the model's command
# with the command's own line numbers ("bash: line 1: ...") as a plain
# ``bash -c`` would. Its EXIT trap (which bash also runs on SIGTERM) writes
# the shell's working directory and exported variables (``bashstate``) to the
# descriptor named by $2, an anonymous file the executor reads and parses
# after the call (``bashstate.parse_state``): state is data, never code. The
# exit status is the command's own.
_ONE_LINE = (
    "__sbx_cmd=$1 __sbx_fd=$2; shift 2; "
    "trap '__sbx_rc=$?; trap - EXIT; set +eu; " + bashstate.SAVE + "exit $__sbx_rc' EXIT; "
    'eval "$__sbx_cmd"'
)
_BACKGROUND = 'eval "$1"'

# A shell started ahead of its call (``_Ready``): it waits for one byte on the
# descriptor named by $3 (the "go"), reads the command, NUL-terminated, from
# the sealed anonymous file named by $2, closes both, then runs exactly as
# ``_ONE_LINE`` does. EOF on "go" (the shell was discarded) ends it quietly.
_READY_PREFIX = (
    "__sbx_in=$1 __sbx_go=$2; shift 2; "
    'IFS= read -r -n 1 __sbx_cmd <&"$__sbx_go" || exit 0; '
    'IFS= read -r -d "" __sbx_cmd <&"$__sbx_in"; '
    "exec {__sbx_in}<&- {__sbx_go}<&-; "
)
_READY_LINE = _READY_PREFIX + _ONE_LINE.replace(
    "__sbx_cmd=$1 __sbx_fd=$2; shift 2; ", "__sbx_fd=$1; shift; ", 1
)
assert _READY_LINE != _READY_PREFIX + _ONE_LINE

_QUOTED = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"")
_SEPARATORS = re.compile(r"\|\||&&|[;|&\n]")
_PREFIXES = frozenset({"sudo", "command", "env", "time", "nice", "nohup", "!", "exec"})
_EXIT_1_NOTES = {
    "grep": "no matches", "egrep": "no matches", "fgrep": "no matches", "rg": "no matches",
    "diff": "files differ", "cmp": "files differ",
    "test": "condition false", "[": "condition false", "[[": "condition false",
}  # fmt: skip


def last_program(command: str) -> str:
    """The program whose status a command line most likely returns.

    A heuristic: the first word of the last simple command, past variable
    assignments and wrappers such as ``sudo``.
    """
    segments = [s for s in _SEPARATORS.split(_QUOTED.sub("''", command)) if s.strip()]
    if not segments:
        return ""
    try:
        words = shlex.split(segments[-1])
    except ValueError:
        words = segments[-1].split()
    for word in words:
        if "=" in word.split("/")[0] or word in _PREFIXES:
            continue
        return os.path.basename(word)
    return ""


def _check_timeout(timeout: int) -> None:
    if timeout < BASH_MIN_TIMEOUT_MS:
        guess = timeout * 1000
        hint = f" Did you mean timeout={guess}?" if 0 < guess <= BASH_MAX_TIMEOUT_MS else ""
        raise ToolError(
            f"timeout {timeout} is too small: timeout is in milliseconds, from "
            f"{BASH_MIN_TIMEOUT_MS} to {BASH_MAX_TIMEOUT_MS}.{hint}"
        )
    if timeout > BASH_MAX_TIMEOUT_MS:
        raise ToolError(
            f"timeout {timeout} is too large: the maximum is {BASH_MAX_TIMEOUT_MS} ms "
            "(10 minutes). For longer commands use run_in_background=true and check the job's log."
        )


#: Reads of at most 64 KiB when taking what is left in the pipe after exit.
_FINAL_READS = 64


def _read_ready(fd: int, capture: Capture, cleaner: Cleaner) -> None:
    """Take the output already waiting in the pipe, without waiting for more."""
    for _ in range(_FINAL_READS):
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        capture.add(cleaner.feed(chunk))


class Shell:
    """The bash state of one instance: cwd/env (in memory), call counter, jobs."""

    def __init__(
        self, workdir: str, state_dir: str, *, env: Mapping[str, str] | None = None
    ) -> None:
        self.workdir = workdir
        self.logs = os.path.join(state_dir, "logs")
        # The workload's environment (the executor's own where none is given).
        self.env = dict(os.environ if env is None else env)
        self.env.update(BASE_ENV)
        #: The working directory the last foreground call ended in.
        self.cwd: str | None = None
        self._lock = FifoLock()
        self._calls = itertools.count(1)
        self._job_ids = itertools.count(1)
        self.jobs = Jobs(workdir)
        #: The next call's shell, started ahead (``_Ready``); False turns it off.
        self.start_ahead = START_AHEAD
        #: Shells started ahead, oldest first: one, or two while calls come
        #: back to back (``_depth``), since a shell takes longer to start
        #: (setpriv, then bash: ~2 ms here) than a caller takes to send the
        #: next call after a result.
        self._ready: list[_Ready] = []
        self._depth = 1
        #: When the last foreground call ended, and until when two shells are
        #: kept (monotonic).
        self._last_end = float("-inf")
        self._two_until = float("-inf")
        #: Calls served by a shell started ahead (observability, tests).
        self.ready_used = 0
        self._closed = False
        self._ready_guard = threading.Lock()
        self._prepare()

    def _prepare(self) -> None:
        # Checked first: re-creating it takes the executor's identity (two
        # id switches each way) on every call otherwise.
        if not os.path.isdir(self.logs):
            logs.prepare(self.logs)

    def _start_dir(self, directory: str, *, forget: bool = True) -> tuple[str, str]:
        """Where the next call starts, and a note when the saved folder is gone."""
        if directory:
            return directory, ""
        if self.cwd is None or self.cwd == self.workdir:
            return self.workdir, ""
        if os.path.isdir(self.cwd):
            return self.cwd, ""
        gone = self.cwd
        if forget:
            self.cwd = None
        return (
            self.workdir,
            f"[The saved working directory {gone} no longer exists; running in {self.workdir}.]\n",
        )

    def _env_for(self, cwd: str) -> dict[str, str]:
        # bash keeps a logical $PWD (through symlinks) when it matches the cwd.
        return {**self.env, "PWD": cwd}

    def run(
        self, raw: dict[str, object], cancel: threading.Event, *, start: str | None = None
    ) -> ToolResult:
        """One command; ``start`` is the caller's folder (a relative workdir
        resolves against it, and without one the command runs there)."""
        args = parse(SPEC, raw)
        command = get_str(args, "command")
        if not command.strip():
            raise ToolError('command is empty. Give a shell command to run, e.g. "ls -la".')
        timeout = get_int(args, "timeout")
        _check_timeout(timeout)
        directory = start or ""
        base = start or self.workdir
        raw_dir = get_opt_str(args, "workdir")
        if raw_dir:
            directory = resolve(base, raw_dir, "workdir")
            if not os.path.isdir(directory):
                if os.path.exists(directory):
                    raise ToolError(f"workdir {display(base, directory)} is a file, not a folder.")
                raise ToolError(
                    not_found(
                        base,
                        directory,
                        "workdir",
                        "Create it first (mkdir -p), or run without workdir.",
                    )
                )
        with self._lock.held():
            self._reap()
            self._prepare()  # the local backend's state folder is the workload's to remove
            if get_bool(args, "run_in_background"):
                return self._background(command, directory, get_opt_str(args, "description"))
            return self._foreground(command, directory, timeout, cancel)

    def _foreground(
        self, command: str, directory: str, timeout_ms: int, cancel: threading.Event
    ) -> ToolResult:
        name = f"bash-{next(self._calls)}.log"
        log_path = os.path.join(self.logs, name)
        started = time.monotonic()
        deadline = started + timeout_ms / 1000
        cleaner = Cleaner()
        cwd, note_gone = self._start_dir(directory)
        env = self._env_for(cwd)
        if started - self._last_end < BACK_TO_BACK_S:
            # Calls come in bursts: two stay ready for the next burst too.
            self._two_until = started + KEEP_TWO_S
        self._depth = 2 if started < self._two_until else 1
        proc, ready = self._start_ready(command, cwd, env)
        if proc is not None and ready is not None:
            state_fd = ready.state_fd
            self.ready_used += 1
        else:
            state_fd = _private_memfd("bash-state", os.MFD_CLOEXEC)
        log = _LazyLog(self.logs, name)
        try:
            capture = Capture(log, LOG_CAP_BYTES)
            if note_gone:
                capture.add(cleaner.feed(note_gone.encode()))
            if proc is None:
                proc = spawn(
                    ["bash", "-c", _ONE_LINE, "bash", command, str(state_fd)],
                    cwd=cwd,
                    env=env,
                    stderr=subprocess.STDOUT,
                    pass_fds=(state_fd,),
                )
            timed_out, cancelled = self._pump(proc, capture, cleaner, deadline, cancel)
            self._keep_state(state_fd, save_cwd=not directory)
            self._last_end = time.monotonic()
            self._start_next()
            return self._foreground_result(
                command, proc, capture, log, started, timeout_ms, log_path, timed_out, cancelled
            )
        finally:
            os.close(state_fd)
            log.close()

    def _start_ready(
        self, command: str, cwd: str, env: dict[str, str]
    ) -> tuple[subprocess.Popen[bytes] | None, _Ready | None]:
        """The oldest shell started ahead that can serve, given the command;
        (None, None) if none can (those that cannot are discarded)."""
        with self._ready_guard:
            spares, self._ready = self._ready, []
        if not self.start_ahead:
            for spare in spares:
                spare.discard()
            return None, None
        while spares:
            ready = spares.pop(0)
            proc = ready.start(command, cwd, env)  # discards itself if it cannot serve
            if proc is not None:
                break
        else:
            return None, None
        with self._ready_guard:
            closed = self._closed
            if not closed:
                self._ready = spares
        if closed:
            for spare in spares:
                spare.discard()
        return proc, ready

    def _start_next(self) -> None:
        """Start the next call's shell ahead, in the state this call left.

        On a thread of its own (the result goes back without waiting for the
        spawn); it takes the bash lock, so it never overlaps a call.
        """
        if not self.start_ahead or self._closed:
            return
        with contextlib.suppress(RuntimeError):  # no thread to spare: the next call spawns
            threading.Thread(target=self._make_ready, name="bash-ahead", daemon=True).start()

    def _make_ready(self) -> None:
        with self._lock.held():
            if self._closed:
                return
            cwd, note_gone = self._start_dir("", forget=False)
            env = self._env_for(cwd)
            with self._ready_guard:
                # Started in a state this call moved on from (cd, export), or
                # beyond the depth wanted now: of no use.
                keep = [r for r in self._ready if (r.cwd, r.env) == (cwd, env)]
                drop = [r for r in self._ready if all(r is not k for k in keep)]
                drop += keep[self._depth :]
                self._ready = keep[: self._depth]
                missing = 0 if note_gone else self._depth - len(self._ready)
            for ready in drop:
                ready.discard()
            for _ in range(missing):
                try:
                    ready = _Ready.spawn(cwd, env)
                except OSError:
                    return  # out of processes or descriptors: the next call spawns (and reports)
                with self._ready_guard:
                    kept = not self._closed
                    if kept:
                        self._ready.append(ready)
                if not kept:
                    ready.discard()
                    return

    def _keep_state(self, state_fd: int, *, save_cwd: bool) -> None:
        size = os.fstat(state_fd).st_size
        state = bashstate.parse_state(os.pread(state_fd, min(size, bashstate.MAX_STATE_BYTES), 0))
        if state is None:
            return  # the command replaced the shell (exec) or removed the trap
        cwd, env = state
        if save_cwd:
            self.cwd = cwd
        self.env = env

    def _pump(
        self,
        proc: subprocess.Popen[bytes],
        capture: Capture,
        cleaner: Cleaner,
        deadline: float,
        cancel: threading.Event,
    ) -> tuple[bool, bool]:
        """Move output until the shell is done; (timed_out, cancelled)."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        timed_out = cancelled = eof = False
        kill_at: float | None = None
        exited_at: float | None = None
        last_data = time.monotonic()
        # Readable when the shell exits: the wait wakes at the exit, not at
        # the next poll (None where pidfd_open is missing: polls as before).
        pidfd = _pidfd(proc.pid)
        try:
            while True:
                now = time.monotonic()
                running = proc.poll() is None
                if kill_at is None and running and (now > deadline or cancel.is_set()):
                    timed_out, cancelled = not cancel.is_set(), cancel.is_set()
                    _signal_group(proc.pid, signal.SIGTERM)
                    kill_at = now + KILL_GRACE
                elif kill_at is not None and running and now > kill_at:
                    _signal_group(proc.pid, signal.SIGKILL)
                    kill_at = float("inf")
                if not running:
                    exited_at = exited_at or now
                    # Background children may hold the pipe open forever.
                    if eof or now - last_data > DRAIN_IDLE or now - exited_at > DRAIN_MAX:
                        # What the shell wrote before it exited is in the pipe
                        # already: take it (a slow start under load must not
                        # lose a command's last output).
                        if not eof:
                            _read_ready(fd, capture, cleaner)
                        break
                watch = [pidfd] if running and pidfd is not None else []
                if eof:
                    # The shell closed its output but runs on: keep
                    # enforcing the timeout while waiting for it.
                    if watch:
                        select.select(watch, [], [], 0.05)
                    else:
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            proc.wait(0.05)
                    continue
                ready, _, _ = select.select([fd, *watch], [], [], 0.05)
                if fd not in ready:
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    eof = True
                    continue
                last_data = time.monotonic()
                capture.add(cleaner.feed(chunk))
        finally:
            if pidfd is not None:
                os.close(pidfd)
            proc.stdout.close()
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        capture.add(cleaner.feed(b"", final=True))
        return timed_out, cancelled

    def _foreground_result(
        self,
        command: str,
        proc: subprocess.Popen[bytes],
        capture: Capture,
        log: _LazyLog,
        started: float,
        timeout_ms: int,
        log_path: str,
        timed_out: bool,
        cancelled: bool,
    ) -> ToolResult:
        duration_ms = int((time.monotonic() - started) * 1000)
        code = proc.returncode
        if code < 0:
            code = 128 - code
        if timed_out:
            code = 124
        note = ""
        if code == 1 and not (timed_out or cancelled):
            note = _EXIT_1_NOTES.get(last_program(command), "")
        lines = ["", f"Exit code: {code}" + (f" ({note})" if note else "")]
        if timed_out:
            lines.append(
                f"[Timed out after {timeout_ms} ms: the command was stopped (SIGTERM, then "
                f"SIGKILL). Re-run with a larger timeout (up to {BASH_MAX_TIMEOUT_MS}), or with "
                f"run_in_background=true and check its log.]"
            )
        if cancelled:
            lines.append("[Cancelled: the caller stopped waiting and the command was stopped.]")
        shown_log = display(self.workdir, log_path)
        capped = " (the first 64 MiB)" if capture.log_full else ""
        notice = (
            f"[Output truncated: {capture.total_chars} characters, shown as the first 20% "
            f"and the last 80%. The full output{capped} is saved in {shown_log}: read it "
            f"with read or grep instead of re-running the command.]"
        )
        # The exit line and notices count towards the 30,000-character cap too.
        room = MAX_TEXT_CHARS - len("\n".join(lines)) - 1
        text, truncated = capture.render(room)
        if truncated:
            text, _ = capture.render(room - len(notice) - 1)
            lines.append(notice)
            log.keep()
        else:
            log.discard()
        lines.insert(0, text or "(no output)")
        return ToolResult(
            "\n".join(lines),
            (code != 0 and not note) or timed_out or cancelled,
            {
                "exit_code": code,
                "timed_out": timed_out,
                "cancelled": cancelled,
                "duration_ms": duration_ms,
                "truncated": truncated,
                "log_path": shown_log if truncated else None,
                "background": False,
                "job_id": None,
                "bash_id": None,
                "pid": None,
            },
        )

    def _background(self, command: str, directory: str, description: str | None) -> ToolResult:
        job_id = next(self._job_ids)
        name = f"job-{job_id}.log"
        log_path = os.path.join(self.logs, name)
        started = time.monotonic()
        cwd, note_gone = self._start_dir(directory)
        with open(logs.create(self.logs, name), "wb") as log:
            if note_gone:
                log.write(note_gone.encode())
                log.flush()
            proc = spawn(
                ["bash", "-c", _BACKGROUND, "bash", command],
                cwd=cwd,
                env=self._env_for(cwd),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        job = Job(job_id, proc, log_path, command)
        self.jobs.add(job)
        shown_log = display(self.workdir, log_path)
        what = description or command
        if len(what) > 80:
            what = what[:77] + "..."
        text = (
            f"Started background job {job.bash_id} (pid {proc.pid}): {what}\n"
            f"Its output goes to {shown_log}. Follow it with bash_output "
            f'(bash_id="{job.bash_id}"), which shows the output since the last check and '
            f'whether it is still running; stop it with kill_shell (shell_id="{job.bash_id}").'
        )
        return ToolResult(
            text,
            False,
            {
                "exit_code": None,
                "timed_out": False,
                "cancelled": False,
                "duration_ms": int((time.monotonic() - started) * 1000),
                "truncated": False,
                "log_path": shown_log,
                "background": True,
                "job_id": job_id,
                "bash_id": job.bash_id,
                "pid": proc.pid,
            },
        )

    def _reap(self) -> None:
        self.jobs.reap()

    def close(self) -> None:
        with self._ready_guard:
            self._closed = True
            spares, self._ready = self._ready, []
        for ready in spares:
            ready.discard()
        self.jobs.close()


class _LazyLog:
    """A call's full log, made on disk only when it may be needed.

    Most commands print little and their log is removed at the end; so the
    output is held in memory up to ``MEMORY`` bytes, and the file is created
    (``logs.create``) once the output outgrows that or the result is cut
    (``keep``).
    """

    MEMORY = 256 * 1024

    def __init__(self, folder: str, name: str) -> None:
        self.folder = folder
        self.name = name
        self._buffer = bytearray()
        self._file: BinaryIO | None = None
        self._closed = False

    def write(self, data: bytes) -> int:
        if self._file is None:
            self._buffer += data
            if len(self._buffer) > self.MEMORY:
                self._open()  # writes the buffer, this data included
            return len(data)
        return self._file.write(data)

    def _open(self) -> None:
        self._file = open(logs.create(self.folder, self.name), "wb")  # noqa: SIM115
        buffered, self._buffer = self._buffer, bytearray()
        self._file.write(buffered)

    def keep(self) -> None:
        """The result was cut: the full output must be on disk."""
        if self._file is None:
            # A full disk must not cost the model its command's result.
            with contextlib.suppress(OSError):
                self._open()
        self.close()

    def discard(self) -> None:
        created = self._file is not None
        self.close()
        if created:
            logs.remove(os.path.join(self.folder, self.name))

    def close(self) -> None:
        if self._file is not None and not self._closed:
            self._closed = True
            self._file.close()


#: Start each call's shell ahead of the call (``_Ready``); the module switch
#: for A/B measurements (``SANDBOXD_BASH_AHEAD=0``).
START_AHEAD = os.environ.get("SANDBOXD_BASH_AHEAD", "1") != "0"
#: A call that starts this soon after the previous one ended makes two
#: shells be kept started ahead instead of one.
BACK_TO_BACK_S = 0.1
#: ... and keeps two for this long after such a call.
KEEP_TWO_S = 10.0
#: Longer commands take the ordinary path (bash reads the command file in blocks; this
#: only bounds what a shell started ahead is handed).
MAX_AHEAD_COMMAND = 1 << 20
_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL


class _Ready:
    """A call's shell started before the call: ``bash`` waiting for its command.

    It is the very process a call would spawn (``_READY_LINE``: the same
    wrapper, session, identity, descriptors, saved cwd and environment),
    only started earlier, so the call skips the fork, exec and bash start-up.
    It serves at most one call: used or not, it is never handed another.
    The command goes in a sealed anonymous file (read back and compared
    after sealing, so nothing the workload does to the descriptor can
    change it); one byte on a pipe says go. Anything unexpected (it died,
    was stopped or traced, the state moved on, sealing fails) discards it
    and the call spawns as usual.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        cwd: str,
        env: dict[str, str],
        where: tuple[int, int],
        fds: tuple[int, int, int],
    ) -> None:
        self.proc = proc
        self.cwd = cwd
        self.env = env
        self.where = where
        self.command_fd, self.go_fd, self.state_fd = fds

    @classmethod
    def spawn(cls, cwd: str, env: dict[str, str]) -> _Ready:
        st = os.stat(cwd)
        command_fd = _private_memfd("bash-command", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        state_fd = _private_memfd("bash-state", os.MFD_CLOEXEC)
        # Made as the executor: the pipe is root's (0600), so a process of the
        # sandbox user cannot reopen it through /proc/<shell>/fd to forge "go".
        with identity.as_executor():
            go_read, go_fd = os.pipe2(os.O_CLOEXEC)
        try:
            proc = spawn(
                ["bash", "-c", _READY_LINE, "bash", str(command_fd), str(go_read), str(state_fd)],
                cwd=cwd,
                env=env,
                stderr=subprocess.STDOUT,
                pass_fds=(command_fd, go_read, state_fd),
                # It runs nothing of the call's before its go: the score
                # written after the spawn is in time (executor.oomscore).
                score_after=True,
            )
        except BaseException:
            for fd in (command_fd, state_fd, go_read, go_fd):
                os.close(fd)
            raise
        os.close(go_read)
        return cls(proc, cwd, env, (st.st_dev, st.st_ino), (command_fd, go_fd, state_fd))

    def start(self, command: str, cwd: str, env: dict[str, str]) -> subprocess.Popen[bytes] | None:
        """Hand over the command and say go; None (and discarded) if it cannot serve."""
        try:
            if self._usable(command, cwd, env):
                data = command.encode("utf-8", "surrogateescape") + b"\0"
                os.pwrite(self.command_fd, data, 0)
                os.ftruncate(self.command_fd, len(data))
                fcntl.fcntl(self.command_fd, fcntl.F_ADD_SEALS, _SEALS)
                if os.pread(self.command_fd, len(data) + 1, 0) == data:
                    os.write(self.go_fd, b"g")
                    os.close(self.command_fd)
                    os.close(self.go_fd)
                    return self.proc
        except OSError:
            pass
        self.discard()
        return None

    def _usable(self, command: str, cwd: str, env: dict[str, str]) -> bool:
        if "\0" in command or len(command) > MAX_AHEAD_COMMAND:
            return False
        if self.proc.poll() is not None or cwd != self.cwd or env != self.env:
            return False
        st = os.stat(cwd)
        if (st.st_dev, st.st_ino) != self.where:
            return False  # the folder was replaced: a fresh shell starts in the new one
        return _waiting(self.proc.pid)

    def discard(self) -> None:
        """Stop it (EOF on go ends it; the group kill covers a stopped one)."""
        for fd in (self.command_fd, self.go_fd, self.state_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _private_memfd(name: str, flags: int) -> int:
    """An anonymous file only its holders can use: made as the executor, mode
    0600 (a memfd is 0777), so another process of the sandbox user cannot
    reopen it through /proc/<pid>/fd and forge a call's state."""
    with identity.as_executor():
        fd = os.memfd_create(name, flags)
        try:
            os.fchmod(fd, 0o600)
        except BaseException:
            os.close(fd)
            raise
    return fd


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def _waiting(pid: int) -> bool:
    """The shell sleeps (in its read of go) and nobody traces it."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            status = fh.read(4096)
    except OSError:
        return False
    state = re.search(rb"^State:\s+(\S)", status, re.M)
    tracer = re.search(rb"^TracerPid:\s+(\d+)", status, re.M)
    return (
        state is not None
        and state.group(1) in (b"S", b"R")
        and tracer is not None
        and tracer.group(1) == b"0"
    )


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)

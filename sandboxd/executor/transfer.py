"""Streamed transfers: upload and download sessions of any size, in chunks.

A transfer is a session the daemon drives one bounded chunk at a time
(``begin`` -> ``chunk``* -> ``commit``/``abort``), so neither end ever holds
more than ``WINDOW`` chunks of ``CHUNK`` bytes whatever the file's size.
An upload writes a temp file next to its target and renames it over the
target on commit, so a stream cut mid-way leaves the old file untouched.
Sessions that stop hearing from the daemon (client gone, channel dropped)
are aborted by a reaper after ``IDLE_S``; a daemon's channel that closes, or
says hello again (its daemon restarted on it), aborts the sessions begun on it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat as stat_module
import tempfile
import threading
import time
from typing import Any

from sandboxd.contract.errors import Conflict, InvalidArgument, NotFound, ResourceExhausted
from sandboxd.executor.files import ABSENT, check_writable, new_mode, os_error
from sandboxd.executor.tools.fsio import PERMISSION_BITS
from sandboxd.executor.tools.locks import PathLocks

#: Bytes per chunk on every hop (client -> daemon -> executor and back).
CHUNK = 1 << 20
#: Chunks in flight per transfer between the daemon and the executor.
WINDOW = 4
#: Open sessions per workspace; more is a client leaking them.
MAX_SESSIONS = 64
#: Aborted ids remembered (a begin may still be running for one).
MAX_TOMBSTONES = 256
#: A session with no call for this long is aborted (its temp file removed).
IDLE_S = 120.0


class Session:
    """One open transfer; subclasses hold the file or the tar stream."""

    def __init__(self) -> None:
        self.touched = time.monotonic()
        #: The daemon channel it was begun on (``Sessions.abort_owned``).
        self.owner: object = None
        self._turn = threading.Condition()
        self._next = 0
        self.closed = False

    def ordered(self, seq: int, cancel: threading.Event) -> None:
        """Wait until every chunk before ``seq`` was handled (chunk calls run on
        a thread pool and may arrive out of order)."""
        with self._turn:
            while self._next != seq:
                if self.closed or cancel.is_set():
                    raise InvalidArgument("the transfer was aborted")
                self._turn.wait(0.5)

    def advance(self) -> None:
        with self._turn:
            self._next += 1
            self._turn.notify_all()

    def abort(self) -> None:
        self.closed = True
        with self._turn:
            self._turn.notify_all()


class Sessions:
    """The open transfers of one executor, with their idle reaper."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Session] = {}
        self._tombstones: dict[str, None] = {}
        self._reaper: threading.Thread | None = None

    def add(self, session_id: str, session: Session, owner: object = None) -> str:
        """Register ``session`` under the id the daemon chose for it, begun on
        the channel ``owner``."""
        session.owner = owner
        with self._lock:
            if session_id in self._tombstones:
                # The daemon aborted it before this begin finished.
                session.abort()
                raise InvalidArgument(f"transfer {session_id!r} was aborted")
            if session_id in self._open:
                session.abort()
                raise InvalidArgument(f"transfer {session_id!r} is already open")
            if len(self._open) >= MAX_SESSIONS:
                session.abort()
                raise ResourceExhausted(
                    f"{MAX_SESSIONS} transfers are already open in this sandbox; "
                    "finish or abort some first"
                )
            self._open[session_id] = session
            if self._reaper is None or not self._reaper.is_alive():
                self._reaper = threading.Thread(target=self._reap, name="reaper", daemon=True)
                self._reaper.start()
            return session_id

    def get(self, session_id: object, kind: type[Any]) -> Any:
        with self._lock:
            session = self._open.get(session_id) if isinstance(session_id, str) else None
        if not isinstance(session, kind):
            raise NotFound(f"no open transfer {session_id!r} (finished, aborted or timed out)")
        session.touched = time.monotonic()
        return session

    def pop(self, session_id: object) -> Session | None:
        with self._lock:
            return self._open.pop(session_id, None) if isinstance(session_id, str) else None

    def abort(self, session_id: str) -> bool:
        """Abort a session; an id not open yet is remembered, so a begin still
        running for it fails instead of leaving an orphan."""
        with self._lock:
            session = self._open.pop(session_id, None)
            if session is None:
                self._tombstones[session_id] = None
                while len(self._tombstones) > MAX_TOMBSTONES:
                    self._tombstones.pop(next(iter(self._tombstones)))
        if session is not None:
            session.abort()
        return session is not None

    def count(self) -> int:
        with self._lock:
            return len(self._open)

    def abort_all(self) -> None:
        with self._lock:
            sessions, self._open = list(self._open.values()), {}
        for session in sessions:
            session.abort()

    def abort_owned(self, owner: object) -> None:
        """Abort the sessions begun on the channel ``owner`` (others go on)."""
        with self._lock:
            mine = [k for k, s in self._open.items() if s.owner is owner]
            sessions = [self._open.pop(k) for k in mine]
        for session in sessions:
            session.abort()

    def _reap(self) -> None:
        while True:
            time.sleep(min(IDLE_S / 4, 10.0))
            now = time.monotonic()
            with self._lock:
                stale = [k for k, s in self._open.items() if now - s.touched > IDLE_S]
                dead = [self._open.pop(k) for k in stale]
                if not self._open:
                    self._reaper = None
            for session in dead:
                session.abort()
            if not dead and self._reaper is None:
                return


def _check_cas(path: str, expected: str | None) -> tuple[os.stat_result | None, str | None]:
    """The target's stat (None when absent), after the compare-and-swap check."""
    try:
        existing = os.stat(path)
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise os_error(exc, path) from exc
    if existing is not None and stat_module.S_ISDIR(existing.st_mode):
        raise InvalidArgument(f"{path} is a directory")
    if existing is not None and not stat_module.S_ISREG(existing.st_mode):
        raise InvalidArgument(f"{path} is not a regular file")
    if existing is not None:
        check_writable(path, path)
    if expected is None:
        return existing, None
    current = ABSENT if existing is None else _sha256_regular(path)
    if current != expected:
        raise Conflict(
            f"{path}: content changed (expected sha256 {expected}, found {current}); "
            "nothing was written"
        )
    return existing, current


def _sha256_regular(path: str) -> str:
    # O_NONBLOCK: the workload may have swapped the file for a FIFO meanwhile.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise os_error(exc, path) from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat_module.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidArgument(f"{path} is not a regular file")
        digest = hashlib.sha256()
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
        return digest.hexdigest()


class Upload(Session):
    """Bytes written at their offsets into a temp file beside the target."""

    def __init__(
        self,
        path: str,
        *,
        create_parents: bool,
        expected_sha256: str | None,
        mode: int | None,
        locks: PathLocks,
    ) -> None:
        super().__init__()
        self.path = path
        # Write through a symlink rather than replacing it (as write_file does).
        self.target = os.path.realpath(path)
        self.expected = expected_sha256
        self.mode = mode
        self.locks = locks
        self.received = 0
        parent = os.path.dirname(self.target) or "."
        if create_parents:
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise os_error(exc, parent) from exc
        elif not os.path.isdir(parent):
            raise NotFound(
                f"{path}: parent directory {parent} does not exist; set create_parents to create it"
            )
        # Checked now to fail fast, and again at commit (the file may change meanwhile).
        _check_cas(self.target, expected_sha256)
        try:
            self.fd, self.temp = tempfile.mkstemp(
                prefix=".sandboxd-upload-", suffix=".tmp", dir=parent
            )
        except OSError as exc:
            raise os_error(exc, self.target) from exc
        self._io = threading.Lock()

    def write(self, offset: int, data: bytes) -> None:
        view = memoryview(data)
        with self._io:
            if self.closed:
                raise InvalidArgument("the transfer was aborted")
            try:
                while view:
                    written = os.pwrite(self.fd, view, offset)
                    view, offset = view[written:], offset + written
            except OSError as exc:
                raise os_error(exc, self.path) from exc
            self.received += len(data)

    def commit(self, size: int) -> dict[str, Any]:
        with self._io:
            if self.closed:
                raise InvalidArgument("the transfer was aborted")
            try:
                if size != self.received:
                    raise InvalidArgument(
                        f"{self.path}: the stream announced {size} bytes but {self.received} "
                        "arrived; nothing was written"
                    )
                with self.locks.held_file(self.path) as target:
                    if target != self.target:
                        raise Conflict(
                            f"{self.path} names {target} now, not {self.target} as when the "
                            "upload began (a symlink changed); nothing was written"
                        )
                    existing, _ = _check_cas(self.target, self.expected)
                    if existing is not None:
                        os.fchmod(self.fd, existing.st_mode & PERMISSION_BITS)
                    else:
                        os.fchmod(self.fd, new_mode(self.mode))
                    os.replace(self.temp, self.target)
                    self.temp = ""
            except OSError as exc:
                raise os_error(exc, self.path) from exc
            finally:
                self._release()
            return {"created": existing is None}

    def abort(self) -> None:
        super().abort()
        with self._io:
            self._release()

    def _release(self) -> None:
        self.closed = True
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.temp:
            with contextlib.suppress(OSError):
                os.unlink(self.temp)
            self.temp = ""


class Download(Session):
    """An open regular file read at offsets: a rename over it mid-download does
    not mix two files' bytes."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        try:
            # O_NONBLOCK: opening a FIFO the workload put there must not hang.
            self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise os_error(exc, path) from exc
        info = os.fstat(self.fd)
        if not stat_module.S_ISREG(info.st_mode):
            os.close(self.fd)
            kind = "a directory" if stat_module.S_ISDIR(info.st_mode) else "not a regular file"
            raise InvalidArgument(f"{path} is {kind}; download regular files (or use a tree)")
        self.size = info.st_size
        # Reads and the close exclude each other: a closed number could
        # otherwise be reused by another open file mid-read.
        self._io = threading.Lock()

    def read(self, offset: int, length: int) -> bytes:
        with self._io:
            if self.closed:
                raise InvalidArgument("the transfer was aborted")
            try:
                return os.pread(self.fd, min(length, CHUNK), offset)
            except OSError as exc:
                raise os_error(exc, self.path) from exc

    def abort(self) -> None:
        super().abort()
        with self._io:
            if self.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self.fd)
                self.fd = -1

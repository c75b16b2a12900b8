"""Low-level file verbs: bytes in, bytes out, no model-facing text.

Every function takes already-decoded arguments and raises the domain errors
of ``sandboxd.contract.errors``; OS errors are translated here so every backend
reports them in the same words.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat as stat_module
import tempfile
from typing import Any

from sandboxd.contract.errors import (
    AlreadyExists,
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SandboxdError,
)
from sandboxd.executor.tools.fsio import PERMISSION_BITS, NotRegularFile, open_regular
from sandboxd.executor.tools.locks import PathLocks

#: ``expected_sha256`` value meaning "write only if the file does not exist".
ABSENT = "absent"

_CHUNK = 1 << 20


def new_mode(requested: int | None) -> int:
    """The mode of a new file: ``requested`` without setuid/setgid, or 0666 & ~umask."""
    if requested is None:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
    return requested & PERMISSION_BITS


def resolve(workdir: str, path: object) -> str:
    """Absolute path for ``path`` (absolute, or relative to ``workdir``)."""
    if not isinstance(path, str) or path == "":
        raise InvalidArgument("path must be a non-empty string")
    if "\x00" in path:
        raise InvalidArgument("path contains a NUL byte")
    return os.path.normpath(os.path.join(workdir, path))


def os_error(exc: OSError, path: str) -> SandboxdError:
    """Translate an OSError about ``path`` into the domain error tree."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, NotRegularFile):
        return InvalidArgument(f"{path} is {exc.kind}, not a regular file")
    if exc.errno == errno.ENOENT:
        return NotFound(f"{path}: no such file or directory")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return PermissionDenied(f"{path}: permission denied")
    if exc.errno == errno.EEXIST:
        return AlreadyExists(f"{path}: already exists")
    if exc.errno == errno.EISDIR:
        return InvalidArgument(f"{path} is a directory")
    if exc.errno == errno.ENOTDIR:
        return InvalidArgument(f"{path}: a parent of this path is not a directory")
    if exc.errno == errno.ENOTEMPTY:
        return InvalidArgument(f"{path} is a non-empty directory; set recursive to remove it")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ResourceExhausted(f"{path}: no space left in the workspace")
    if exc.errno == errno.EROFS:
        return PermissionDenied(f"{path}: read-only file system")
    if exc.errno == errno.ENAMETOOLONG:
        return InvalidArgument(f"{path}: file name too long")
    if exc.errno == errno.ELOOP:
        return InvalidArgument(f"{path}: too many levels of symbolic links")
    if exc.errno in (errno.EINVAL, errno.EOVERFLOW, errno.EFBIG):
        return InvalidArgument(f"{path}: {reason} (check offsets and sizes)")
    return SandboxdError(f"{path}: {reason}")


def file_type(mode: int) -> str:
    if stat_module.S_ISLNK(mode):
        return "symlink"
    if stat_module.S_ISDIR(mode):
        return "directory"
    if stat_module.S_ISREG(mode):
        return "file"
    return "other"


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_file(path: str, offset: int, length: int | None, max_bytes: int) -> dict[str, Any]:
    try:
        # Non-blocking: a FIFO must not hold this thread in open().
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise os_error(exc, path) from exc
    try:
        info = os.fstat(fd)
        if stat_module.S_ISDIR(info.st_mode):
            raise InvalidArgument(f"{path} is a directory; use list_dir")
        if not stat_module.S_ISREG(info.st_mode):
            raise os_error(NotRegularFile(path, info.st_mode), path)
        size = info.st_size
        wanted = max(size - offset, 0) if length is None else length
        if wanted > max_bytes:
            raise ResourceExhausted(
                f"{path}: reading {wanted} bytes exceeds the payload limit of {max_bytes} "
                "bytes; read it in pieces with offset and length"
            )
        parts: list[bytes] = []
        # Past the end there is nothing to read (and offset + length could
        # overflow the kernel's file offset).
        position, remaining = offset, wanted if offset < size else 0
        while remaining > 0:
            chunk = os.pread(fd, min(remaining, _CHUNK), position)
            if not chunk:
                break
            parts.append(chunk)
            position += len(chunk)
            remaining -= len(chunk)
        data = b"".join(parts)
        return {"data": data, "size": size, "eof": offset + len(data) >= size}
    except OSError as exc:
        raise os_error(exc, path) from exc
    finally:
        os.close(fd)


def write_file(
    path: str,
    data: bytes,
    *,
    create_parents: bool,
    expected_sha256: str | None,
    mode: int | None,
    locks: PathLocks,
) -> dict[str, Any]:
    # Write through a symlink rather than replacing it with a regular file;
    # locked as the file it names, however it is spelled.
    with locks.held_file(path) as target:
        parent = os.path.dirname(target) or "."
        if create_parents:
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise os_error(exc, parent) from exc
        elif not os.path.isdir(parent):
            raise NotFound(
                f"{path}: parent directory {parent} does not exist; set create_parents to create it"
            )
        try:
            existing = os.stat(target)
        except FileNotFoundError:
            existing = None
        except OSError as exc:
            raise os_error(exc, path) from exc
        if existing is not None and stat_module.S_ISDIR(existing.st_mode):
            raise InvalidArgument(f"{path} is a directory")
        if existing is not None and stat_module.S_ISREG(existing.st_mode):
            check_writable(target, path)
        if expected_sha256 is not None:
            try:
                current = ABSENT if existing is None else sha256_of(target)
            except OSError as exc:
                raise os_error(exc, path) from exc
            if current != expected_sha256:
                raise Conflict(
                    f"{path}: content changed (expected sha256 {expected_sha256}, "
                    f"found {current}); nothing was written"
                )
        _replace_atomically(target, data, existing, mode)
        return {
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "created": existing is None,
        }


def check_writable(target: str, path: str) -> None:
    """Refuse to replace an existing file its mode forbids the caller to write.

    The rename that makes a write atomic needs only the directory's permission,
    so without this a file made read-only (``chmod -w``) would be replaced all
    the same; ``open()`` is what says whether this caller may write it.
    Opening for writing changes nothing: no truncation, no new mtime.
    """
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise os_error(exc, path) from exc
    os.close(fd)


def _replace_atomically(
    target: str, data: bytes, existing: os.stat_result | None, mode: int | None
) -> None:
    parent = os.path.dirname(target) or "."
    try:
        fd, temp = tempfile.mkstemp(prefix=".sandboxd-", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise os_error(exc, target) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if existing is not None:
            os.chmod(temp, existing.st_mode & PERMISSION_BITS)
        else:
            # mkstemp creates 0600; a new file gets the usual umask-derived mode.
            os.chmod(temp, new_mode(mode))
        os.replace(temp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise os_error(exc, target) from exc


def stat(path: str, *, follow_symlinks: bool) -> dict[str, Any]:
    try:
        info = os.stat(path) if follow_symlinks else os.lstat(path)
    except OSError as exc:
        raise os_error(exc, path) from exc
    return _describe(path, info)


def _describe(path: str, info: os.stat_result) -> dict[str, Any]:
    kind = file_type(info.st_mode)
    target = ""
    if kind == "symlink":
        with contextlib.suppress(OSError):
            target = os.readlink(path)
    return {
        "path": path,
        "name": os.path.basename(path) or path,
        "type": kind,
        "size": info.st_size,
        "mode": stat_module.S_IMODE(info.st_mode),
        "mtime_ns": info.st_mtime_ns,
        "symlink_target": target,
    }


def list_dir(path: str) -> list[dict[str, Any]]:
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise os_error(exc, path) from exc
    entries = []
    for name in names:
        child = os.path.join(path, name)
        try:
            entries.append(_describe(child, os.lstat(child)))
        except FileNotFoundError:
            continue  # removed while listing
    return entries


def exists(path: str) -> dict[str, Any]:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False, "type": None}
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return {"exists": False, "type": None}
        raise os_error(exc, path) from exc
    return {"exists": True, "type": file_type(info.st_mode)}


def make_dir(path: str, *, parents: bool, exist_ok: bool) -> dict[str, Any]:
    try:
        if parents:
            already = os.path.isdir(path)
            if already and not exist_ok:
                raise AlreadyExists(f"{path}: already exists")
            os.makedirs(path, exist_ok=True)
            return {"created": not already}
        os.mkdir(path)
        return {"created": True}
    except FileExistsError as exc:
        if exist_ok and os.path.isdir(path):
            return {"created": False}
        raise os_error(exc, path) from exc
    except OSError as exc:
        raise os_error(exc, path) from exc


def remove(path: str, *, recursive: bool, missing_ok: bool, protected: tuple[str, ...]) -> bool:
    if path in protected or path == os.sep:
        raise InvalidArgument(f"{path} is the workspace root and cannot be removed")
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:
        if missing_ok:
            return False
        raise os_error(exc, path) from exc
    except OSError as exc:
        raise os_error(exc, path) from exc
    try:
        if stat_module.S_ISDIR(info.st_mode):
            if recursive:
                remove_tree(path)
            else:
                os.rmdir(path)
        else:
            os.unlink(path)
    except OSError as exc:
        raise os_error(exc, getattr(exc, "filename", None) or path) from exc
    return True


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def remove_tree(path: str) -> None:
    """``rm -rf`` for a tree of any depth: no recursion, no path-length limit.

    shutil.rmtree recurses once per level (RecursionError past ~1,000) and
    sandbox code can make trees far deeper. This walk holds one descriptor,
    goes down by name and back up through ``..``, checking at each step up
    that it reached the folder it came from, so a folder moved meanwhile
    cannot lead it out of the tree.
    """
    current = os.open(path, _DIR_FLAGS)
    trail: list[tuple[str, tuple[int, int]]] = []  # (name, (dev, ino) of its parent)
    try:
        while True:
            child = None
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        child = entry.name
                        break
                    os.unlink(entry.name, dir_fd=current)
            if child is not None:
                info = os.fstat(current)
                below = os.open(child, _DIR_FLAGS, dir_fd=current)
                os.close(current)
                current = below
                trail.append((child, (info.st_dev, info.st_ino)))
                continue
            if not trail:
                break
            name, parent_id = trail.pop()
            above = os.open("..", _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = above
            info = os.fstat(current)
            if (info.st_dev, info.st_ino) != parent_id:
                raise OSError(errno.ESTALE, "the tree changed while it was being removed", path)
            os.rmdir(name, dir_fd=current)
    finally:
        os.close(current)
    os.rmdir(path)

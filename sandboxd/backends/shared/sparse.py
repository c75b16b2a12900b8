"""Make one sparse file's content another's of the same size, in place.

A restore writes a snapshot's disk image over the workspace's (the loop
device stays bound to that file, so it must be the same inode). ``cp``
truncates the target first: every block of it is freed and allocated
again, about half of the copy's time on ext4 (measured: 200-340 ms for a
131 MB image against 110-240 ms in place). Here only the source's data
ranges are copied (``copy_file_range``: in the kernel, into the blocks the
target already has) and the target's data where the source has a hole is
punched out, so the result reads exactly as the source and stays sparse.
"""

from __future__ import annotations

import ctypes
import errno
import os

#: linux/falloc.h: FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE.
_PUNCH_HOLE = 0x01 | 0x02
#: Zeros written where a hole cannot be punched (the content matters, not the sparseness).
_ZEROS = bytes(1 << 20)

#: What says this file system cannot copy or punch in place: the caller copies instead.
UNSUPPORTED = frozenset({errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL})


def data_ranges(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` parts of the file that hold data (holes read as zeros)."""
    found = []
    offset = start
    while offset < end:
        try:
            begin = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after offset
                break
            raise
        if begin >= end:
            break
        stop = min(os.lseek(fd, begin, os.SEEK_HOLE), end)
        found.append((begin, stop))
        offset = stop
    return found


def _holes(ranges: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The parts of ``[0, size)`` between ``ranges`` (sorted, disjoint)."""
    holes = []
    offset = 0
    for begin, stop in ranges:
        if begin > offset:
            holes.append((offset, begin))
        offset = stop
    if offset < size:
        holes.append((offset, size))
    return holes


def _copy_range(source: int, target: int, begin: int, stop: int) -> None:
    offset = begin
    while offset < stop:
        copied = os.copy_file_range(source, target, stop - offset, offset, offset)
        if copied == 0:
            raise OSError(errno.EIO, f"the source ended at {offset}, before {stop}")
        offset += copied


def _zero(target: int, begin: int, stop: int) -> None:
    """Make ``[begin, stop)`` of ``target`` read as zeros: punched, or written."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if libc.fallocate(target, _PUNCH_HOLE, begin, stop - begin) == 0:
        return
    if ctypes.get_errno() not in UNSUPPORTED:
        raise OSError(ctypes.get_errno(), "fallocate(PUNCH_HOLE) failed")
    offset = begin
    while offset < stop:
        offset += os.pwrite(target, _ZEROS[: stop - offset], offset)


def overwrite(source: str, target: str) -> None:
    """Give ``target`` (same size, not in use) exactly ``source``'s bytes, in place.

    OSError with an errno in ``UNSUPPORTED`` when the file system cannot do
    it this way: ``target`` may then be half-written, and the caller copies
    it whole instead.
    """
    source_fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        target_fd = os.open(target, os.O_RDWR | os.O_CLOEXEC)
        try:
            size = os.fstat(source_fd).st_size
            if os.fstat(target_fd).st_size != size:
                raise OSError(errno.EINVAL, f"{target} is not the size of {source}")
            data = data_ranges(source_fd, 0, size)
            for begin, stop in _holes(data, size):
                for hole_begin, hole_stop in data_ranges(target_fd, begin, stop):
                    _zero(target_fd, hole_begin, hole_stop)
            for begin, stop in data:
                _copy_range(source_fd, target_fd, begin, stop)
        finally:
            os.close(target_fd)
    finally:
        os.close(source_fd)

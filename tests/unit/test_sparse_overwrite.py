"""sparse.overwrite, the restore's in-place image copy: the target reads exactly
as the source (data, holes as zeros), stays sparse, and a target of another
size is refused untouched."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sandboxd.backends.shared import sparse

pytestmark = [pytest.mark.unit]

MiB = 1 << 20
SIZE = 64 * MiB


def _sparse_file(path: Path, pieces: dict[int, bytes]) -> Path:
    with path.open("wb") as out:
        out.truncate(SIZE)
        for offset, data in pieces.items():
            out.seek(offset)
            out.write(data)
    return path


def _allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def _holes_supported(folder: Path) -> bool:
    probe = _sparse_file(folder / "probe", {8 * MiB: b"x" * 4096})
    fd = os.open(probe, os.O_RDONLY)
    try:
        return sparse.data_ranges(fd, 0, SIZE) == [(8 * MiB, 8 * MiB + 4096)]
    finally:
        os.close(fd)
        probe.unlink()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    if not _holes_supported(tmp_path):
        pytest.skip("this file system reports no holes (SEEK_DATA)")
    return tmp_path


def test_the_target_reads_as_the_source_and_keeps_its_holes(folder: Path) -> None:
    source = _sparse_file(
        folder / "source.img",
        {0: os.urandom(MiB), 10 * MiB: os.urandom(3 * MiB), SIZE - 4096: b"end" * 1000},
    )
    # Data where the source has holes, holes where it has data, other bytes where both have.
    target = _sparse_file(
        folder / "target.img",
        {0: os.urandom(MiB // 2), 20 * MiB: os.urandom(5 * MiB), 40 * MiB: b"\xff" * MiB},
    )
    inode = target.stat().st_ino
    sparse.overwrite(str(source), str(target))
    assert target.read_bytes() == source.read_bytes()
    assert target.stat().st_ino == inode  # in place: a loop device bound to it sees it
    # The target's data outside the source's was punched out, not written as zeros.
    assert _allocated(target) <= _allocated(source) + 64 * 1024


def test_an_empty_source_empties_the_target(folder: Path) -> None:
    source = _sparse_file(folder / "source.img", {})
    target = _sparse_file(folder / "target.img", {5 * MiB: os.urandom(2 * MiB)})
    sparse.overwrite(str(source), str(target))
    assert target.read_bytes() == bytes(SIZE)
    assert _allocated(target) < 64 * 1024


def test_a_target_of_another_size_is_refused_untouched(folder: Path) -> None:
    source = _sparse_file(folder / "source.img", {0: b"a" * 4096})
    target = folder / "target.img"
    target.write_bytes(b"b" * 8192)
    with pytest.raises(OSError) as raised:
        sparse.overwrite(str(source), str(target))
    assert raised.value.errno == errno.EINVAL
    assert target.read_bytes() == b"b" * 8192

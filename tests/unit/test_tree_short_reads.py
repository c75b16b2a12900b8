"""Issue 23 item 11: a file that reads shorter than stat said (it shrank, or
it is a /sys attribute) no longer breaks a tree download."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandboxd.executor.tree import _Padded

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def test_a_file_that_shrank_is_padded_to_the_size_promised(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    fd = os.open(path, os.O_RDONLY)
    try:
        padded = _Padded(fd, 10)  # the header said 10 bytes
        assert padded.read(4) + padded.read(100) == b"abc" + bytes(7)
        assert padded.read(1) == b""
    finally:
        os.close(fd)


def test_a_read_error_is_zeros_not_an_exception(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # read() of a folder: EISDIR
    try:
        assert _Padded(fd, 5).read() == bytes(5)
    finally:
        os.close(fd)

"""Issue 23 item 10: a sparse tar entry of a few KB no longer becomes GBs on
disk (the extractor is the same on the host, for downloads, and in the
sandbox, for uploads)."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest

from sandboxd.contract import untar
from sandboxd.contract.errors import InvalidArgument

pytestmark = pytest.mark.unit

APPARENT = 64 << 20


def _sparse_tar(tmp_path: Path) -> bytes:
    source = tmp_path / "src"
    source.mkdir()
    with (source / "hole").open("wb") as handle:
        handle.write(b"x" * 100)
        handle.truncate(APPARENT)
    subprocess.run(["tar", "--sparse", "-C", str(source), "-cf", str(tmp_path / "s.tar"), "hole"],
                   check=True)  # fmt: skip
    return (tmp_path / "s.tar").read_bytes()


def test_a_sparse_entry_is_refused_and_nothing_big_is_written(tmp_path: Path) -> None:
    data = _sparse_tar(tmp_path)
    assert len(data) < 64 << 10  # a few KB on the wire
    target = tmp_path / "out"
    with pytest.raises(InvalidArgument, match=r"'hole': sparse entries are refused \(67108864"):
        untar.extract(io.BytesIO(data), str(target))
    written = sum(os.stat(p).st_blocks * 512 for p in target.rglob("*") if p.is_file())
    assert written < 1 << 20

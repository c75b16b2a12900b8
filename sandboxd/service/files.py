"""Unary file operations: read, write, stat, list, exists, make_dir, remove."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sandboxd.contract import validation
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import (
    ExistsResult,
    FileInfo,
    FileType,
    ReadFileResult,
    WriteFileResult,
)
from sandboxd.executor.files import ABSENT
from sandboxd.service.core import ServiceCore

_SHA256 = re.compile(r"[0-9a-f]{64}")


def _file_info(raw: Mapping[str, Any]) -> FileInfo:
    return FileInfo(
        path=str(raw["path"]),
        name=str(raw["name"]),
        type=FileType(raw["type"]),
        size=int(raw["size"]),
        mode=int(raw["mode"]),
        mtime_ns=int(raw["mtime_ns"]),
        symlink_target=str(raw.get("symlink_target", "")),
    )


class Files(ServiceCore):
    async def read_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> ReadFileResult:
        validation.path(path)
        validation.non_negative(offset, "offset")
        if length is not None:
            validation.non_negative(length, "length")
            self._check_payload(length, "length")
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("read_file", {"path": path, "offset": offset, "length": length})
        return ReadFileResult(data=raw["data"], size=int(raw["size"]), eof=bool(raw["eof"]))

    async def write_file(
        self,
        instance_id: str,
        path: str,
        data: bytes,
        *,
        create_parents: bool = False,
        expected_sha256: str | None = None,
        mode: int | None = None,
    ) -> WriteFileResult:
        validation.path(path)
        self._check_payload(len(data), "data", streaming="Upload (client-streaming)")
        check_write_args(expected_sha256, mode)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call(
            "write_file",
            {
                "path": path,
                "data": data,
                "create_parents": create_parents,
                "expected_sha256": expected_sha256,
                "mode": mode,
            },
        )
        return WriteFileResult(
            size=int(raw["size"]), sha256=str(raw["sha256"]), created=bool(raw["created"])
        )

    async def stat(self, instance_id: str, path: str, *, follow_symlinks: bool = False) -> FileInfo:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        return _file_info(
            await workspace.call("stat", {"path": path, "follow_symlinks": follow_symlinks})
        )

    async def list_dir(self, instance_id: str, path: str) -> list[FileInfo]:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("list_dir", {"path": path})
        return [_file_info(entry) for entry in raw["entries"]]

    async def exists(self, instance_id: str, path: str) -> ExistsResult:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call("exists", {"path": path})
        kind = raw.get("type")
        return ExistsResult(exists=bool(raw["exists"]), type=FileType(kind) if kind else None)

    async def make_dir(
        self, instance_id: str, path: str, *, parents: bool = False, exist_ok: bool = False
    ) -> bool:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call(
            "make_dir", {"path": path, "parents": parents, "exist_ok": exist_ok}
        )
        return bool(raw["created"])

    async def remove(
        self, instance_id: str, path: str, *, recursive: bool = False, missing_ok: bool = False
    ) -> bool:
        validation.path(path)
        workspace = await self._workspace(instance_id)
        raw = await workspace.call(
            "remove", {"path": path, "recursive": recursive, "missing_ok": missing_ok}
        )
        return bool(raw["removed"])


def check_write_args(expected_sha256: str | None, mode: int | None) -> None:
    if expected_sha256 is not None and not (
        expected_sha256 == ABSENT or _SHA256.fullmatch(expected_sha256)
    ):
        raise InvalidArgument(
            f"expected_sha256 must be 64 lowercase hex digits or {ABSENT!r} "
            f"(got {expected_sha256!r})"
        )
    if mode is not None and not 0 <= mode <= 0o7777:
        raise InvalidArgument(f"mode must be a permission value 0..0o7777 (got {mode:#o})")

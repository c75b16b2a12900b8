"""A workspace as a portable tar, both ways, through sandboxd's streamed tree transfer.

openai-agents moves a workspace as one tar stream whose members are relative to
the workspace root (``persist_workspace`` / ``hydrate_workspace``), so a
snapshot taken on one backend restores on another. The bytes travel as
sandboxd's ``DownloadTree`` / ``UploadTree`` streams (one call each way, never
a file-by-file loop) and are spooled locally: in memory up to
``SPOOL_IN_MEMORY``, then on disk, so a large workspace costs disk, not memory.

The portable form is the SDK's own (``strip_tar_member_prefix``: devices and
FIFOs dropped, absolute symlinks into the workspace made relative, the result
validated), and a tar to hydrate is checked whole by the SDK's
``validate_tarfile`` before anything is extracted, as its Docker client does.
sandboxd's extractor then checks every entry again as it writes it.
"""

from __future__ import annotations

import asyncio
import copy
import io
import tarfile
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, cast

from agents.sandbox.errors import WorkspaceArchiveReadError, WorkspaceArchiveWriteError
from agents.sandbox.util.tar_utils import (
    UnsafeTarMemberError,
    should_skip_tar_member,
    strip_tar_member_prefix,
    validate_tarfile,
)

from runtime_client.errors import NotFound, SandboxdError
from runtime_client.sandbox import Sandbox

#: Bytes of a workspace tar kept in memory before the spool moves to a temporary file.
SPOOL_IN_MEMORY = 8 << 20
#: Read size when spooling a caller's stream or sending the spool.
CHUNK = 1 << 20
# The SDK normalizes archives whose members sit under one folder (Docker archives
# a staged copy); sandboxd's tree comes relative already, so it is put under this
# name first and handed to the same normalization.
_PREFIX = "workspace"


def spool() -> IO[bytes]:
    """A temporary file that stays in memory while small."""
    return cast(IO[bytes], tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY))


async def persist(sandbox: Sandbox, root: str, skip: set[Path]) -> io.IOBase:
    """The tree under ``root`` as a portable tar, without the ``skip`` paths (root-relative)."""
    raw = spool()
    try:
        try:
            async for item in sandbox.download_tree_iter(root):
                if isinstance(item, bytes):
                    raw.write(item)
        except NotFound as exc:
            raise WorkspaceArchiveReadError(path=Path(root), cause=exc, retryable=False) from exc
        except SandboxdError as exc:
            raise WorkspaceArchiveReadError(path=Path(root), cause=exc) from exc
        raw.seek(0)
        try:
            return await asyncio.to_thread(_portable, raw, skip, root)
        except (tarfile.TarError, UnsafeTarMemberError, OSError) as exc:
            raise WorkspaceArchiveReadError(path=Path(root), cause=exc) from exc
    finally:
        raw.close()


def _portable(raw: IO[bytes], skip: set[Path], root: str) -> io.IOBase:
    prefixed = spool()
    try:
        with (
            tarfile.open(fileobj=raw, mode="r|") as source,
            tarfile.open(fileobj=prefixed, mode="w|", format=tarfile.PAX_FORMAT) as target,
        ):
            for member in source:
                if should_skip_tar_member(member.name, skip_rel_paths=skip, root_name=None):
                    continue
                moved = copy.copy(member)
                moved.name = f"{_PREFIX}/{member.name}"
                moved.pax_headers = {k: v for k, v in member.pax_headers.items() if k != "path"}
                payload = source.extractfile(member) if member.isreg() else None
                target.addfile(moved, payload)
        prefixed.seek(0)
    except BaseException:
        prefixed.close()
        raise
    # Takes ``prefixed`` over (and closes it); returns a seekable temporary file.
    return strip_tar_member_prefix(
        cast(io.IOBase, prefixed), prefix=_PREFIX, relativize_symlinks_under=root
    )


async def hydrate(sandbox: Sandbox, root: str, data: io.IOBase) -> None:
    """Extract a portable workspace tar under ``root``, after checking all of it."""
    archive = await asyncio.to_thread(_spool_checked, data, root)
    try:
        await sandbox.upload_tree(_chunks_of(archive), root)
    except SandboxdError as exc:
        raise WorkspaceArchiveWriteError(path=Path(root), cause=exc) from exc
    finally:
        archive.close()


def _spool_checked(data: io.IOBase, root: str) -> IO[bytes]:
    archive = spool()
    try:
        while chunk := data.read(CHUNK):
            if isinstance(chunk, str):
                chunk = chunk.encode()
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise WorkspaceArchiveWriteError(
                    path=Path(root), context={"reason": "non_bytes_tar_payload"}
                )
            archive.write(chunk)
        archive.seek(0)
        try:
            with tarfile.open(fileobj=archive, mode="r:*") as tar:
                validate_tarfile(tar, allow_external_symlink_targets=False)
        except UnsafeTarMemberError as exc:
            raise WorkspaceArchiveWriteError(
                path=Path(root), context={"reason": exc.reason, "member": exc.member}, cause=exc
            ) from exc
        except (tarfile.TarError, OSError) as exc:
            raise WorkspaceArchiveWriteError(path=Path(root), cause=exc) from exc
        archive.seek(0)
        return archive
    except BaseException:
        archive.close()
        raise


async def _chunks_of(archive: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := await asyncio.to_thread(archive.read, CHUNK):
        yield chunk

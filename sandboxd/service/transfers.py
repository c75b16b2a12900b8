"""Streamed transfers: files and folder trees of any size, in and out.

Every hop moves CHUNK-byte pieces with at most WINDOW of them in flight per
transfer, so the daemon holds O(WINDOW * CHUNK) whatever the size.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Awaitable
from typing import Any

import anyio

from sandboxd.contract import validation
from sandboxd.contract.errors import SandboxdError
from sandboxd.contract.models import (
    DownloadDone,
    SkippedLink,
    TreeDownloadDone,
    TreeUploadResult,
    WriteFileResult,
)
from sandboxd.contract.untar import MAX_LISTED
from sandboxd.executor.transfer import CHUNK, WINDOW
from sandboxd.service.core import ServiceCore
from sandboxd.service.files import check_write_args
from sandboxd.service.ports import Workspace


class Transfers(ServiceCore):
    async def upload_file(
        self,
        instance_id: str,
        path: str,
        chunks: AsyncIterable[bytes],
        *,
        create_parents: bool = False,
        expected_sha256: str | None = None,
        mode: int | None = None,
    ) -> WriteFileResult:
        """Write a file of any size from a stream of byte chunks: atomically on
        completion, nothing changed if the stream breaks."""
        validation.path(path)
        check_write_args(expected_sha256, mode)
        workspace = await self._workspace(instance_id)
        session = _session_id()
        await _begin(
            workspace,
            "upload_begin",
            {
                "session": session,
                "path": path,
                "create_parents": create_parents,
                "expected_sha256": expected_sha256,
                "mode": mode,
            },
        )
        digest = hashlib.sha256()
        offset = 0
        window: deque[asyncio.Future[Any]] = deque()
        done = False
        try:
            async for piece in _rechunk(chunks):
                digest.update(piece)
                if len(window) >= WINDOW:
                    await window.popleft()
                window.append(
                    _start(
                        workspace.call(
                            "upload_chunk", {"session": session, "offset": offset, "data": piece}
                        )
                    )
                )
                offset += len(piece)
            while window:
                await window.popleft()
            raw = await workspace.call("upload_commit", {"session": session, "size": offset})
            done = True
        finally:
            await _settle(window)
            if not done:
                await _abort_transfer(workspace, session)
        return WriteFileResult(size=offset, sha256=digest.hexdigest(), created=bool(raw["created"]))

    async def download_file(
        self, instance_id: str, path: str, offset: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes | DownloadDone]:
        """The file's bytes in chunks, then one ``DownloadDone``."""
        validation.path(path)
        validation.non_negative(offset, "offset")
        if length is not None:
            validation.non_negative(length, "length")
        workspace = await self._workspace(instance_id)
        session = _session_id()
        begun = await _begin(workspace, "download_begin", {"session": session, "path": path})
        size = int(begun["size"])
        end = size if length is None else min(size, offset + length)
        digest = hashlib.sha256()
        sent = 0
        window: deque[asyncio.Future[Any]] = deque()
        ahead = offset
        try:
            while True:
                while len(window) < WINDOW and ahead < end:
                    want = min(CHUNK, end - ahead)
                    window.append(
                        _start(
                            workspace.call(
                                "download_read",
                                {"session": session, "offset": ahead, "length": want},
                            )
                        )
                    )
                    ahead += want
                if not window:
                    break
                data = (await window.popleft())["data"]
                if not isinstance(data, bytes) or len(data) > CHUNK:
                    raise SandboxdError("the executor sent a malformed download chunk")
                if not data:
                    break  # the file shrank meanwhile
                digest.update(data)
                sent += len(data)
                yield data
        finally:
            await _settle(window)
            await _abort_transfer(workspace, session)
        yield DownloadDone(size=sent, sha256=digest.hexdigest(), file_size=size)

    async def upload_tree(
        self, instance_id: str, path: str, chunks: AsyncIterable[bytes]
    ) -> TreeUploadResult:
        """Extract a tar stream into the folder ``path`` (created), inside the sandbox."""
        validation.path(path)
        workspace = await self._workspace(instance_id)
        session = _session_id()
        await _begin(workspace, "tree_upload_begin", {"session": session, "path": path})
        seq = 0
        window: deque[asyncio.Future[Any]] = deque()
        done = False
        try:
            async for piece in _rechunk(chunks):
                if len(window) >= WINDOW:
                    await window.popleft()
                window.append(
                    _start(
                        workspace.call(
                            "tree_upload_chunk", {"session": session, "seq": seq, "data": piece}
                        )
                    )
                )
                seq += 1
            while window:
                await window.popleft()
            raw = await workspace.call("tree_upload_commit", {"session": session, "seq": seq})
            done = True
        finally:
            await _settle(window)
            if not done:
                await _abort_transfer(workspace, session)
        return tree_upload_result(raw)

    async def download_tree(
        self, instance_id: str, path: str, *, gitignore: bool = False
    ) -> AsyncIterator[bytes | TreeDownloadDone]:
        """The folder ``path`` as a tar stream in chunks, then one ``TreeDownloadDone``."""
        validation.path(path)
        workspace = await self._workspace(instance_id)
        session = _session_id()
        await _begin(
            workspace,
            "tree_download_begin",
            {"session": session, "path": path, "gitignore": gitignore},
        )
        window: deque[asyncio.Future[Any]] = deque()
        seq = 0
        final: dict[str, Any] = {}
        try:
            while True:
                while len(window) < WINDOW:
                    window.append(
                        _start(
                            workspace.call("tree_download_read", {"session": session, "seq": seq})
                        )
                    )
                    seq += 1
                raw = await window.popleft()
                data = raw.get("data")
                if not isinstance(data, bytes) or len(data) > CHUNK:
                    raise SandboxdError("the executor sent a malformed tar chunk")
                if raw.get("eof"):
                    final = raw
                    break
                yield data
        finally:
            await _settle(window)
            await _abort_transfer(workspace, session)
        yield TreeDownloadDone(
            entries=int(final.get("entries", 0)),
            bytes=int(final.get("bytes", 0)),
            skipped=int(final.get("skipped", 0)),
        )


async def _rechunk(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """Fixed CHUNK-byte pieces (the last may be shorter) from chunks of any size."""
    buffer = bytearray()
    async for chunk in chunks:
        if not buffer and len(chunk) == CHUNK:
            yield chunk
            continue
        buffer += chunk
        while len(buffer) >= CHUNK:
            yield bytes(buffer[:CHUNK])
            del buffer[:CHUNK]
    if buffer:
        yield bytes(buffer)


def _start(call: Awaitable[dict[str, Any]]) -> asyncio.Future[Any]:
    return asyncio.ensure_future(call)


async def _settle(window: deque[asyncio.Future[Any]]) -> None:
    """Cancel the calls still in flight and wait for them to end."""
    for future in window:
        future.cancel()
    with anyio.CancelScope(shield=True):
        for future in window:
            with contextlib.suppress(BaseException):
                await future
    window.clear()


def _session_id() -> str:
    return f"t-{uuid.uuid4().hex}"


async def _begin(workspace: Workspace, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """Open a session under an id the daemon chose, so a begin cut short (the
    client left while it ran) can still be aborted by that id."""
    try:
        return await workspace.call(op, args)
    except BaseException:
        await _abort_transfer(workspace, str(args["session"]))
        raise


async def _abort_transfer(workspace: Workspace, session: str) -> None:
    """End a session on the executor (its temp file goes), even when this task
    is being cancelled because the client went away: the abort runs as a task
    of its own (the executor's idle reaper is the last backstop)."""

    async def abort() -> None:
        with anyio.move_on_after(10), contextlib.suppress(SandboxdError):
            await workspace.call("transfer_abort", {"session": session})

    task = asyncio.get_running_loop().create_task(abort())
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(task)


#: Abort tasks still running (a reference keeps them from being collected).
_BACKGROUND: set[asyncio.Task[None]] = set()


def tree_upload_result(raw: dict[str, Any]) -> TreeUploadResult:
    """A tree extraction's counts (untar.extract's shape) as the model; the
    listed links are checked, since the executor is on the other side."""
    listed = raw.get("skipped_links") or []
    return TreeUploadResult(
        files=int(raw["files"]),
        directories=int(raw["directories"]),
        symlinks=int(raw["symlinks"]),
        bytes=int(raw["bytes"]),
        skipped_links=tuple(
            SkippedLink(
                path=str(link["path"]), target=str(link["target"]), reason=str(link["reason"])
            )
            for link in listed[:MAX_LISTED]
            if isinstance(link, dict)
        ),
        links_skipped=int(raw.get("links_skipped", 0)),
    )

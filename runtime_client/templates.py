"""Build a template (an image sandboxes can be created from) from a folder.

    info = await build_template(factory.transport, "./my-template")
    box = await factory.transport.create_sandbox("a1", SandboxOptions(image=info.image))

The folder is sent as a tar made the same way every time (names sorted,
times, owners and modes normalised), so the daemon's content tag finds an
unchanged build again and answers at once (``info.cached``).
"""

from __future__ import annotations

import asyncio
import io
import os
import tarfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from runtime_client.transport import SandboxTransport
from sandboxd.contract.models import TemplateInfo

#: How much of the tar is made at a time (and sent as one piece).
PIECE = 1 << 20


def _members(folder: Path) -> list[Path]:
    found = []
    for parent, dirs, names in os.walk(folder):
        dirs.sort()
        found += [Path(parent, name) for name in dirs]
        found += [Path(parent, name) for name in sorted(names)]
    return sorted(found, key=lambda path: path.relative_to(folder).as_posix())


def _tar(folder: Path) -> bytes:
    # Whole in memory: a template's context is a Dockerfile and what it copies.
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in _members(folder):
            info = archive.gettarinfo(str(path), arcname=path.relative_to(folder).as_posix())
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
            info.pax_headers = {}
            if info.isfile():
                with path.open("rb") as handle:
                    archive.addfile(info, handle)
            else:
                archive.addfile(info)
    return buffer.getvalue()


async def context_of(folder: str | Path) -> AsyncIterator[bytes]:
    """The folder as a build context: a tar stream, the same bytes for the same files."""
    data = await asyncio.to_thread(_tar, Path(folder))
    for start in range(0, len(data), PIECE):
        yield data[start : start + PIECE]


async def build_template(
    transport: SandboxTransport,
    folder: str | Path,
    *,
    dockerfile: str = "Dockerfile",
    log: Callable[[str], None] | None = None,
) -> TemplateInfo:
    """Build the template of ``folder`` (its ``dockerfile`` and what it copies);
    ``log`` gets the build's output line by line."""
    return await _built(transport.build_template(dockerfile, context_of(folder)), log)


async def template_from_snapshot(
    transport: SandboxTransport, name: str, *, log: Callable[[str], None] | None = None
) -> TemplateInfo:
    """A template of snapshot ``name``: a new sandbox of ``info.image`` starts
    with the snapshot's files."""
    return await _built(transport.template_from_snapshot(name), log)


async def _built(
    answers: AsyncIterator[str | TemplateInfo], log: Callable[[str], None] | None
) -> TemplateInfo:
    result: TemplateInfo | None = None
    async for part in answers:
        if isinstance(part, TemplateInfo):
            result = part
        elif log is not None:
            log(part)
    if result is None:
        raise RuntimeError("the daemon ended the build without an answer")
    return result

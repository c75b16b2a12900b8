"""Templates: an image built from a Dockerfile and its context, through the daemon.

The context arrives as a tar stream, kept in a temporary file (at most
``template_max_context_bytes``) while the engine builds from it; what a
build may do, its tag and the checks of the result are the engine's
(``backends/docker/templates.py``). Templates are images of the engine, not
a tenant's: any caller may build one and create sandboxes from it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path

import anyio

from sandboxd.backends.shared.snapshots import unknown
from sandboxd.contract import validation
from sandboxd.contract.errors import InvalidArgument, ResourceExhausted
from sandboxd.contract.models import TemplateInfo
from sandboxd.service.core import ServiceCore
from sandboxd.service.scope import current_scope


class Templates(ServiceCore):
    async def build_template(
        self, dockerfile: str, context: AsyncIterable[bytes]
    ) -> AsyncIterator[str | TemplateInfo]:
        """The build's log lines, then the template."""
        dockerfile = dockerfile or "Dockerfile"
        validation.path(dockerfile, "dockerfile")
        if dockerfile.startswith("/") or ".." in dockerfile.split("/"):
            raise InvalidArgument(f"dockerfile {dockerfile!r} must be a path inside the context")
        fd, name = tempfile.mkstemp(prefix="sandboxd-template-", suffix=".tar")
        path = Path(name)
        try:
            limit = self.settings.template_max_context_bytes
            size = 0
            with os.fdopen(fd, "wb") as out:
                async for piece in context:
                    size += len(piece)
                    if size > limit:
                        raise ResourceExhausted(
                            f"the build context is over {limit} bytes "
                            "(SANDBOXD_TEMPLATE_MAX_CONTEXT_BYTES); leave out what the build "
                            "does not need"
                        )
                    await anyio.to_thread.run_sync(out.write, piece)
            async for part in self.backend.build_template(path, dockerfile):
                yield part
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name)

    async def template_from_snapshot(self, name: str) -> AsyncIterator[str | TemplateInfo]:
        """A template of the caller's snapshot ``name`` (a new sandbox of its
        image starts with the snapshot's files): the build's log, then it."""
        validation.snapshot_name(name)
        tenant = current_scope().tenant or ""
        if all(snapshot.name != name for snapshot in await self.backend.snapshots(tenant)):
            raise unknown(name)  # another tenant's too, before what this engine can do
        async for part in self.backend.template_from_snapshot(name, tenant):
            yield part

"""Backends the conformance suite runs the tool cases on.

A backend is anything that can call a tool in a fresh, empty workspace and
knows that workspace's absolute path (cases write ``{cwd}`` for it). Each
factory in ``BACKEND_FACTORIES`` is an async context manager that yields a
new backend with an empty workspace and throws it away afterwards; more
backends (e.g. Docker over gRPC) are added by inserting into the dict.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import anyio.to_thread

from sandboxd.executor.tools import ToolSession


class ToolBackend(Protocol):
    workdir: str

    async def call(self, name: str, args: dict[str, object]) -> dict[str, object]:
        """Run one tool; return ``{"text", "is_error", "fields"}``."""
        ...


class LocalToolBackend:
    """``ToolSession`` in-process, in a temporary folder."""

    def __init__(self, root: str, *, grep_engine: str | None = None) -> None:
        root = os.path.realpath(root)  # cases compare absolute paths textually
        self.workdir = os.path.join(root, "workspace")
        self.session = ToolSession(self.workdir, state_dir=os.path.join(root, "state"))
        self.session.context.grep_engine = grep_engine

    async def call(self, name: str, args: dict[str, object]) -> dict[str, object]:
        run = functools.partial(self.session.run, name, args)
        return await anyio.to_thread.run_sync(run)

    def close(self) -> None:
        self.session.close()


class FolderToolBackend(LocalToolBackend):
    """Every call carries a per-call folder (CallTool's ``cwd``) below the
    session's workdir: the cases' ``{cwd}`` is that folder, so each case
    shows the tool honouring it (how the Flue adapter calls the tools).

    A bash call with a folder starts there every time (as Flue's own bash
    tool does), so the cases about the saved cwd do not apply
    (``NOT_APPLICABLE``).
    """

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.workdir = os.path.join(self.session.workdir, "agent", "folder")
        os.makedirs(self.workdir)

    async def call(self, name: str, args: dict[str, object]) -> dict[str, object]:
        run = functools.partial(self.session.run, name, args, cwd=self.workdir)
        return await anyio.to_thread.run_sync(run)


@contextlib.asynccontextmanager
async def folder_backend() -> AsyncIterator[ToolBackend]:
    with tempfile.TemporaryDirectory(prefix="sandboxd-conf-") as root:
        backend = FolderToolBackend(root)
        try:
            yield backend
        finally:
            backend.close()


@contextlib.asynccontextmanager
async def local_backend(grep_engine: str | None = None) -> AsyncIterator[ToolBackend]:
    with tempfile.TemporaryDirectory(prefix="sandboxd-conf-") as root:
        backend = LocalToolBackend(root, grep_engine=grep_engine)
        try:
            yield backend
        finally:
            backend.close()


#: Cases a backend is not run with: they are about state it does not keep.
NOT_APPLICABLE: dict[str, frozenset[str]] = {
    "local-cwd": frozenset(
        {
            "bash_persistent_cd",
            "bash_cd_persists_even_after_failure",
            "bash_workdir_does_not_change_saved_cwd",
            "bash_saved_cwd_deleted",
            "bash_background_job_uses_saved_cwd_and_env",
        }
    ),
}

BACKEND_FACTORIES: dict[str, Callable[[], AbstractAsyncContextManager[ToolBackend]]] = {
    "local": local_backend,
    # The same in-process backend with grep's pure-Python engine forced, so
    # both engines answer every grep case (the Docker image always has rg).
    "local-pygrep": functools.partial(local_backend, grep_engine="python"),
    "local-cwd": folder_backend,
}

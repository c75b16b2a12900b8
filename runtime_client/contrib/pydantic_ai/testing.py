"""pydantic-ai's own provider suite, ready to run against a sandboxd daemon.

    from runtime_client.contrib.pydantic_ai.testing import SandboxdBackendSuite

    class TestMyImage(SandboxdBackendSuite):
        @pytest.fixture
        def sandboxd_workspace(self) -> SandboxdWorkspace:
            return SandboxdWorkspace(TARGET, options=SandboxOptions(image="my-image:1"))

Every optional fixture of ``WorkspaceBackendSuite`` is provided (fresh and
attached backends, destroying an environment), so no rule skips for want of
one; every workspace a test makes is deleted after it. Needs pytest and
anyio's pytest plugin.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from pydantic_ai.workspaces import WorkspaceBackend, WorkspaceRef
from pydantic_ai.workspaces.conformance import WorkspaceBackendSuite

from runtime_client.contrib.pydantic_ai._backend import SandboxdWorkspaceBackend
from runtime_client.contrib.pydantic_ai._capability import SandboxdWorkspace

Builder = Callable[[], WorkspaceBackend]


class SandboxdBackendSuite(WorkspaceBackendSuite):
    """``WorkspaceBackendSuite`` on sandboxd: provide ``sandboxd_workspace``."""

    @pytest.fixture
    def sandboxd_workspace(self) -> SandboxdWorkspace[None]:
        raise NotImplementedError("provide a `sandboxd_workspace` fixture")

    @pytest.fixture
    async def _made(
        self, sandboxd_workspace: SandboxdWorkspace[None]
    ) -> AsyncIterator[list[SandboxdWorkspaceBackend]]:
        made: list[SandboxdWorkspaceBackend] = []
        yield made
        for backend in made:
            if backend.ref is not None:
                with contextlib.suppress(Exception):
                    await sandboxd_workspace.destroy(backend.ref)

    @pytest.fixture
    def backend(
        self, sandboxd_workspace: SandboxdWorkspace[None], _made: list[SandboxdWorkspaceBackend]
    ) -> WorkspaceBackend:
        backend = sandboxd_workspace.backend()
        _made.append(backend)
        return backend

    @pytest.fixture
    def fresh_backend(
        self, sandboxd_workspace: SandboxdWorkspace[None], _made: list[SandboxdWorkspaceBackend]
    ) -> Builder:
        def build() -> WorkspaceBackend:
            backend = sandboxd_workspace.backend()
            _made.append(backend)
            return backend

        return build

    @pytest.fixture
    def attach_backend(
        self, sandboxd_workspace: SandboxdWorkspace[None]
    ) -> Callable[[WorkspaceRef], WorkspaceBackend]:
        return sandboxd_workspace.backend

    @pytest.fixture
    def destroy_environment(
        self, sandboxd_workspace: SandboxdWorkspace[None]
    ) -> Callable[[WorkspaceBackend], Awaitable[None]]:
        async def destroy(backend: WorkspaceBackend) -> None:
            assert backend.ref is not None
            await sandboxd_workspace.destroy(backend.ref)

        return destroy

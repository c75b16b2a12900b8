"""pydantic-ai's own provider suite (``WorkspaceBackendSuite``) against sandboxd
workspaces on a real daemon and engine: every rule, optional fixtures included."""

from __future__ import annotations

import pytest

from runtime_client.contrib.pydantic_ai import SandboxdWorkspace
from runtime_client.contrib.pydantic_ai.testing import SandboxdBackendSuite
from tests.helpers import Daemon


class TestSandboxdWorkspaceBackend(SandboxdBackendSuite):
    @pytest.fixture
    def sandboxd_workspace(self, frameworks_daemon: Daemon) -> SandboxdWorkspace[None]:
        return SandboxdWorkspace(frameworks_daemon.target)

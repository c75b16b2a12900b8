"""inspect_ai's own sandbox provider suite (``self_check``) against a sandboxd
sample environment on a real daemon and engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from inspect_ai.util import SandboxEnvironment
from inspect_ai.util._sandbox.self_check import *  # noqa: F403

from runtime_client.contrib.inspect_ai import SandboxdConfig
from runtime_client.contrib.inspect_ai.testing import mark_refused_by_design, sample_environment
from tests.helpers import Daemon

pytestmark = [pytest.mark.anyio]


@pytest.fixture
async def sandbox_env(
    request: pytest.FixtureRequest, frameworks_daemon: Daemon
) -> AsyncIterator[SandboxEnvironment]:
    mark_refused_by_design(request)
    async with sample_environment(SandboxdConfig(target=frameworks_daemon.target)) as env:
        yield env

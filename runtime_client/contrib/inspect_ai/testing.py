"""Running inspect's own sandbox provider suite (``self_check``) on sandboxd.

from inspect_ai.util._sandbox.self_check import *  # noqa: F403
from runtime_client.contrib.inspect_ai.testing import mark_refused_by_design, sample_environment

@pytest.fixture
async def sandbox_env(request):
    mark_refused_by_design(request)
    async with sample_environment(SandboxdConfig(target=TARGET)) as env:
        yield env
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from inspect_ai.util import SandboxEnvironment, SandboxUserUnsupportedError

from runtime_client.contrib.inspect_ai._config import SandboxdConfig
from runtime_client.contrib.inspect_ai._environment import SandboxdSandboxEnvironment

#: The checks sandboxd fails on purpose, and why: each asks for something it
#: refuses by design (SECURITY.md).
REFUSED_BY_DESIGN = {
    "test_exec_as_user": "runs commands as root (adduser) and as another user: sandboxd runs "
    "every command as the workspace's one unprivileged user, with no capabilities",
}


def mark_refused_by_design(request: pytest.FixtureRequest) -> None:
    """Mark the running check as an expected failure if sandboxd refuses what it
    asks for (strict: should it pass, the refusal is gone and the list is wrong)."""
    reason = REFUSED_BY_DESIGN.get(request.node.originalname)
    if reason is not None:
        request.node.add_marker(
            pytest.mark.xfail(reason=reason, strict=True, raises=SandboxUserUnsupportedError)
        )


@asynccontextmanager
async def sample_environment(
    config: SandboxdConfig, task_name: str = "self_check"
) -> AsyncIterator[SandboxEnvironment]:
    """One sample's environment, made and cleaned up the way an eval does."""
    await SandboxdSandboxEnvironment.task_init(task_name, config)
    environments = await SandboxdSandboxEnvironment.sample_init(task_name, config, {})
    try:
        yield environments["default"]
    finally:
        await SandboxdSandboxEnvironment.sample_cleanup(task_name, config, environments, False)
        await SandboxdSandboxEnvironment.task_cleanup(task_name, config, True)

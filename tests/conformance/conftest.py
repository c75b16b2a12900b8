"""The ``tool_backend`` fixture: one fresh workspace per test, per backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .backends import BACKEND_FACTORIES, ToolBackend
from .docker_backend import docker_backend

# The Docker backend needs the session daemon, so it is a fixture-aware param
# (and docker-marked: under CI=true it fails rather than skips without an engine).
# "gvisor" is the same over gRPC in a runsc container (`make engine` registers it).
_PARAMS = [
    *BACKEND_FACTORIES,
    pytest.param("docker", marks=pytest.mark.docker),
    pytest.param("gvisor", marks=pytest.mark.docker),
]


@pytest.fixture(params=_PARAMS)
async def tool_backend(request: pytest.FixtureRequest) -> AsyncIterator[ToolBackend]:
    if request.param in ("docker", "gvisor"):
        daemon = request.getfixturevalue("daemon")
        async with docker_backend(daemon, gvisor=request.param == "gvisor") as backend:
            yield backend
        return
    async with BACKEND_FACTORIES[request.param]() as backend:
        yield backend

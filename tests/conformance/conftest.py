"""The ``tool_backend`` fixture: one fresh workspace per test, per backend."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .backends import BACKEND_FACTORIES, NOT_APPLICABLE, ToolBackend
from .docker_backend import docker_backend

# The Docker backend needs the session daemon, so it is a fixture-aware param
# (and docker-marked: under CI=true it fails rather than skips without an engine).
# "gvisor" is the same over gRPC in a runsc container (`make engine` registers it).
_PARAMS = [
    *BACKEND_FACTORIES,
    pytest.param("docker", marks=pytest.mark.docker),
    pytest.param("gvisor", marks=pytest.mark.docker),
]
# "kubernetes": the same over gRPC on a daemon with the kubernetes backend,
# on the test cluster (make k8s); with the kubernetes tier (SANDBOXD_K8S_TESTS=1).
if os.environ.get("SANDBOXD_K8S_TESTS") == "1":
    _PARAMS.append(pytest.param("kubernetes", marks=pytest.mark.kubernetes))


@pytest.fixture(params=_PARAMS)
async def tool_backend(request: pytest.FixtureRequest) -> AsyncIterator[ToolBackend]:
    if request.param == "kubernetes":
        async with docker_backend(request.getfixturevalue("kube_pool_daemon")) as backend:
            yield backend
        return
    if request.param in ("docker", "gvisor"):
        daemon = request.getfixturevalue("daemon")
        async with docker_backend(daemon, gvisor=request.param == "gvisor") as backend:
            yield backend
        return
    async with BACKEND_FACTORIES[request.param]() as backend:
        yield backend


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A case about state a backend does not keep is not generated for it at
    # all (deselected, never skipped: a skip would look like missing set-up).
    keep, drop = [], []
    here = Path(__file__).parent
    for item in items:
        # The hook sees every test of the session: only the conformance cases count.
        params = getattr(getattr(item, "callspec", None), "params", {})
        name = getattr(params.get("case"), "name", None)
        backend = params.get("tool_backend")
        if item.path.is_relative_to(here) and name in NOT_APPLICABLE.get(str(backend), frozenset()):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

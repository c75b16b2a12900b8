"""Both container runtimes as an agent meets them: everyday commands give the
same result under runc and gVisor (runsc), and GetStatus says which runsc
build and platform the engine runs."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory, NotFound, Runtime, SandboxOptions
from tests.docker.everyday_commands import CASE_ENV, CASES, Case
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

RUNTIMES = (Runtime.RUNC, Runtime.RUNSC)
# One workspace per runtime serves every case (each in its own directory): a
# cold create per case would be most of the run.
_RUN = secrets.token_hex(3)


def _shared_id(runtime: Runtime) -> str:
    return f"everyday-{runtime.value}-{_RUN}"


@pytest.fixture(scope="module")
def shared_workspaces(daemon: Daemon) -> Iterator[None]:
    yield

    async def delete() -> None:
        async with GrpcSandboxFactory(daemon.target) as factory:
            for runtime in RUNTIMES:
                with contextlib.suppress(NotFound):
                    await factory.transport.delete_sandbox(_shared_id(runtime))

    asyncio.run(delete())  # through the daemon: container, volume and disk image


def _params() -> list[object]:
    params: list[object] = []
    for case in CASES:
        for runtime in RUNTIMES:
            marks = []
            if runtime == Runtime.RUNSC and case.runsc_gap:
                marks.append(pytest.mark.xfail(reason=case.runsc_gap, strict=True))
            params.append(pytest.param(case, runtime, marks=marks, id=f"{case.id}-{runtime.value}"))
    return params


@pytest.mark.parametrize(("case", "runtime"), _params())
async def test_everyday_command(
    factory: GrpcSandboxFactory, shared_workspaces: None, runtime: Runtime, case: Case
) -> None:
    instance_id = _shared_id(runtime)
    await factory.transport.create_sandbox(instance_id, SandboxOptions(runtime=runtime))
    box = await factory.create_sandbox(instance_id)
    folder = f"ev/{case.id}"
    await box.exec(["mkdir", "-p", folder])
    result = await box.exec(case.script, cwd=folder, env=CASE_ENV, timeout_ms=60_000)
    got = (result.exit_code, result.stdout.decode(), result.stderr.decode())
    assert got == (case.exit_code, case.stdout, case.stderr)


def test_there_are_at_least_thirty_everyday_commands() -> None:
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


async def test_status_reports_each_runtime_build_and_platform(
    factory: GrpcSandboxFactory, docker_client: docker.DockerClient
) -> None:
    engine = docker_client.info()["Runtimes"]
    status = await factory.transport.get_status()
    by_name = {r.name: r for r in status.runtimes}
    assert sorted(by_name) == ["runc", "runsc"]

    runsc = by_name["runsc"]
    assert runsc.available  # `make engine` registers it
    path = engine["runsc"]["path"]
    said = (await anyio.run_process([path, "--version"])).stdout.decode()
    assert runsc.version and runsc.version in said.splitlines()[0]
    assert f"--platform={runsc.platform}" in engine["runsc"].get("runtimeArgs", [])

    runc = by_name["runc"]
    assert runc.available and runc.platform == ""
    said = (await anyio.run_process(["runc", "--version"])).stdout.decode()
    assert runc.version and runc.version in said.splitlines()[0]


async def test_runsc_is_new_enough_for_statx(factory: GrpcSandboxFactory) -> None:
    # Debian 12's runsc (0.0~20221219) answers statx/fstatat with AT_NO_AUTOMOUNT
    # with EINVAL; scripts/register-gvisor.sh installs a newer build.
    status = await factory.transport.get_status()
    (runsc,) = [r for r in status.runtimes if r.name == "runsc"]
    assert runsc.version >= "0.0~20240729", runsc.version

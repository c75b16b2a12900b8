"""The executor's modules on a real engine: the daemon's bytecode where the
container's python3 can load it, compiled sources otherwise (executor.bundle).

An in-process DockerBackend (``open_workspace``), so the test sees what each
executor said in its hello (``DockerWorkspace.executor_bytecode``).
"""

from __future__ import annotations

import importlib.util

import pytest

from sandboxd.backends.docker.workspace import DockerWorkspace
from sandboxd.contract.models import Runtime
from tests.docker_fixtures import OpenWorkspace

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]

MAGIC = "import importlib.util; print(importlib.util.MAGIC_NUMBER.hex())"


async def _expected(workspace: DockerWorkspace) -> str:
    """What the executor must have done, from the container's own python3."""
    theirs = (await workspace.call("exec", {"argv": ["python3", "-c", MAGIC]}))["stdout"]
    same = theirs.decode().strip() == importlib.util.MAGIC_NUMBER.hex()
    return "shipped" if same else "compiled"


@pytest.mark.parametrize("runtime", [Runtime.RUNC, Runtime.RUNSC])
async def test_the_executor_loads_the_daemons_bytecode_when_its_python_can(
    open_workspace: OpenWorkspace, runtime: Runtime
) -> None:
    workspace = await open_workspace(runtime)
    assert workspace.executor_bytecode == await _expected(workspace)
    # And it is the executor that answers: a tool call does its work.
    wrote = await workspace.call(
        "tool", {"name": "write", "args": {"file_path": "a", "content": "x"}}
    )
    assert not wrote.get("is_error"), wrote
    assert (await workspace.call("read_file", {"path": "a"}))["data"] == b"x"


async def test_the_setting_ships_sources_only(open_workspace: OpenWorkspace) -> None:
    workspace = await open_workspace(ship_bytecode=False)
    assert workspace.executor_bytecode == "compiled"
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"


async def test_a_restarted_executor_says_it_again(open_workspace: OpenWorkspace) -> None:
    workspace = await open_workspace()
    expected = await _expected(workspace)
    await workspace.disconnect()
    workspace.container.kill()
    await workspace.ensure_running()
    assert workspace.executor_bytecode == expected

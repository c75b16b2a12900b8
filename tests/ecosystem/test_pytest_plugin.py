"""runtime_client.pytest_plugin through pytest's own pytester: real inner pytest runs."""

from __future__ import annotations

import pytest

from runtime_client import GrpcSandboxFactory
from tests.helpers import Daemon

# pytester runs real inner pytest sessions; a test module (not a nested
# conftest) may enable it.
pytest_plugins = ["pytester"]

pytestmark = pytest.mark.inproc

INNER_TESTS = """
import pytest

async def test_fresh_workspace(sandbox, sandbox_backend):
    assert sandbox_backend == "{default}"
    assert (await sandbox.exists("marker.txt")).exists is False
    wrote = await sandbox.write("marker.txt", "mine\\n")
    assert not wrote.is_error, wrote.text
    ran = await sandbox.bash("cat marker.txt && pwd")
    assert ran.text.startswith("mine\\n")

async def test_second_test_does_not_see_the_first(sandbox):
    assert (await sandbox.exists("marker.txt")).exists is False

@pytest.mark.sandbox_backend("grpc")
async def test_marker_picks_grpc(sandbox, sandbox_backend):
    assert sandbox_backend == "grpc"
    info = await sandbox.info()
    assert info.instance_id.startswith("pytest-test_marker_picks_grpc-")

@pytest.mark.sandbox_backend("local")
async def test_marker_picks_local(sandbox_factory):
    assert sandbox_factory.backend == "local"
    a = await sandbox_factory.create_sandbox()
    b = await sandbox_factory.create_sandbox()
    await a.write("only-in-a", "x")
    assert (await b.exists("only-in-a")).exists is False

async def test_an_agent_runs_in_a_throwaway_workspace(sandbox_factory):
    from runtime_client import Agent, ScriptedModel

    script = [[("bash", {"command": "echo agent > out.txt"})], []]
    agent = Agent(model=ScriptedModel(script), instructions="test", sandbox=sandbox_factory)
    run = await agent.run("go", instance_id="pytest-agent-" + sandbox_factory.backend)
    assert run.stop_reason == "completed"
    assert (await run.sandbox.read_file("out.txt")).data == b"agent\\n"
    assert [s.instance_id for s in sandbox_factory.created] == [run.sandbox.instance_id]

@pytest.mark.sandbox_backend("grpc")
async def test_failure_still_cleans_up(sandbox):
    await sandbox.write("f", "x")
    assert False, "deliberate"
"""


async def _leftovers(daemon: Daemon) -> list[str]:
    async with GrpcSandboxFactory(daemon.target) as factory:
        return [
            info.instance_id
            for info in await factory.transport.list_sandboxes()
            if info.instance_id.startswith("pytest-")
        ]


@pytest.mark.anyio
@pytest.mark.parametrize("default", ["local", "grpc"])
async def test_fixtures_give_fresh_sandboxes_and_remove_them(
    pytester: pytest.Pytester, local_daemon: Daemon, default: str
) -> None:
    pytester.makepyfile(test_inner=INNER_TESTS.replace("{default}", default))
    result = pytester.runpytest_subprocess(
        f"--sandbox-backend={default}", f"--sandbox-target={local_daemon.target}", "-v"
    )
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*test_failure_still_cleans_up*FAILED*", "*deliberate*"])
    assert await _leftovers(local_daemon) == []


def test_ini_and_env_choose_the_grpc_backend(
    pytester: pytest.Pytester, local_daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOXD_TARGET", local_daemon.target)
    pytester.makeini("[pytest]\nsandbox_backend = grpc\n")
    pytester.makepyfile(
        """
        async def test_it(sandbox, sandbox_backend):
            assert sandbox_backend == "grpc"
            assert (await sandbox.info()).state == "running"
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)


def test_loads_with_dash_p_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As for a checkout that is not pip-installed: no entry points at all, -p names the modules.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        """
        async def test_it(sandbox):
            result = await sandbox.bash("echo hello")
            assert result.text.startswith("hello")
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "anyio.pytest_plugin", "-p", "runtime_client.pytest_plugin"
    )
    result.assert_outcomes(passed=1)
    # With the entry point loaded too, -p is the same plugin, not a second one.
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    result = pytester.runpytest_subprocess("-p", "runtime_client.pytest_plugin")
    result.assert_outcomes(passed=1)


def test_marker_and_options_are_documented(pytester: pytest.Pytester) -> None:
    markers = pytester.runpytest_subprocess("--markers")
    markers.stdout.fnmatch_lines(["*@pytest.mark.sandbox_backend(name)*"])
    helptext = pytester.runpytest_subprocess("--help")
    helptext.stdout.fnmatch_lines(["*--sandbox-backend*", "*--sandbox-target*"])


def test_unknown_backend_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.sandbox_backend("k8s")
        async def test_it(sandbox):
            pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.stdout.fnmatch_lines(["*sandbox backend must be one of*k8s*"])
    assert result.ret != 0


def test_loading_the_plugin_imports_nothing_of_the_client(pytester: pytest.Pytester) -> None:
    # The entry point loads the plugin into every pytest run where sandboxd is
    # installed: a run that uses no `sandbox` fixture must not pay for grpc,
    # the local backend or the agent runtime.
    pytester.makepyfile(
        """
        import sys

        HEAVY = (
            "grpc", "google.protobuf", "pydantic", "pydantic_settings", "docker",
            "sandboxd.contract.models", "sandboxd.service.sandbox_service",
            "sandboxd.backends.local.backend",
            "runtime_client.factories", "runtime_client.grpc_transport", "runtime_client.tools",
        )

        def test_plugin_is_loaded_and_light(request):
            assert request.config.pluginmanager.has_plugin("runtime_client.pytest_plugin")
            assert "runtime_client.pytest_plugin" in sys.modules
            assert [name for name in HEAVY if name in sys.modules] == []
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)

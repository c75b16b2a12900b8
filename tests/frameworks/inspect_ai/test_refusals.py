"""What inspect asks and sandboxd refuses by design is a typed error naming
the reason, never a silent no-op; the workspace's own user is not refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from inspect_ai.util import SandboxEnvironment, SandboxUserUnsupportedError
from pydantic import ValidationError

from runtime_client.contrib.inspect_ai import SandboxdConfig, SandboxdSandboxEnvironment
from runtime_client.contrib.inspect_ai.testing import sample_environment
from tests.helpers import Daemon

pytestmark = [pytest.mark.anyio]


@pytest.fixture
async def env(frameworks_daemon: Daemon) -> AsyncIterator[SandboxEnvironment]:
    async with sample_environment(SandboxdConfig(target=frameworks_daemon.target)) as made:
        yield made


@pytest.mark.parametrize("user", ["root", "0", "nobody"])
async def test_another_user_is_refused_with_the_reason(env: SandboxEnvironment, user: str) -> None:
    with pytest.raises(
        SandboxUserUnsupportedError, match=rf"as '{user}': switching users .*by design"
    ):
        await env.exec(["id", "-u"], user=user)
    with pytest.raises(SandboxUserUnsupportedError, match="by design"):
        await env.connection(user=user)


@pytest.mark.parametrize("user", ["sandbox", "1000"])
async def test_the_workspace_user_itself_is_not_refused(env: SandboxEnvironment, user: str) -> None:
    result = await env.exec(["id", "-u"], user=user)
    assert result.stdout == "1000\n"


async def test_connection_is_a_sandboxctl_shell(env: SandboxEnvironment) -> None:
    connection = await env.connection()
    box = env.as_type(SandboxdSandboxEnvironment).sandbox
    assert connection.type == "sandboxd-workspace"
    assert connection.command.endswith(f" shell {box.instance_id}")


async def test_a_compose_file_or_host_mounts_are_refused() -> None:
    with pytest.raises(ValueError, match="reads no compose file or Dockerfile"):
        await SandboxdSandboxEnvironment.sample_init("t", "compose.yaml", {})
    with pytest.raises(ValidationError, match="never mounts host paths"):
        SandboxdConfig(options={"volumes": ["/:/host"]})
    with pytest.raises(ValidationError, match="unknown sandbox options"):
        SandboxdConfig(options={"privileged": True})


async def test_the_token_is_named_never_held(monkeypatch: pytest.MonkeyPatch) -> None:
    config = SandboxdConfig(token_env="SANDBOXD_TEST_TOKEN")
    monkeypatch.delenv("SANDBOXD_TEST_TOKEN", raising=False)
    with pytest.raises(ValueError, match="SANDBOXD_TEST_TOKEN, which is not set"):
        config.token()
    monkeypatch.setenv("SANDBOXD_TEST_TOKEN", "s3cret")
    assert config.token() == "s3cret"
    assert "s3cret" not in config.model_dump_json()

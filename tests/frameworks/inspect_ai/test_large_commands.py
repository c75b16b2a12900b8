"""An argv longer than sandboxd takes in one request (MAX_COMMAND_BYTES, half
the kernel's limit) runs as inspect's Docker sandbox runs it, through a file
of arguments; what the kernel itself refuses stays refused, and an argument
sandboxd refuses by type stays that typed error."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import pytest
from inspect_ai.util import SandboxEnvironment

from runtime_client.contrib.inspect_ai import SandboxdConfig, SandboxdSandboxEnvironment
from runtime_client.contrib.inspect_ai.testing import sample_environment
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.validation import MAX_ARG_STRLEN, MAX_COMMAND_BYTES
from tests.helpers import Daemon

pytestmark = [pytest.mark.anyio]

CHUNK = "x" * (64 << 10)


@pytest.fixture
async def env(frameworks_daemon: Daemon) -> AsyncIterator[SandboxEnvironment]:
    async with sample_environment(SandboxdConfig(target=frameworks_daemon.target)) as made:
        yield made


async def _argv_files(env: SandboxEnvironment) -> str:
    listed = await env.exec(["sh", "-c", "ls -a /tmp | grep -c inspect-argv || true"])
    return listed.stdout.strip()


async def test_an_argv_past_the_request_limit_runs_with_its_stdin_env_and_cwd(
    env: SandboxEnvironment,
) -> None:
    count = MAX_COMMAND_BYTES // len(CHUNK) + 4  # past sandboxd's limit, within the kernel's
    args = [f"{index:04d}{CHUNK}" for index in range(count)]
    script = 'cat; printf "%s|%s|" "$PWD" "$MARK"; printf "%s" "$@" | sha256sum'
    result = await env.exec(
        ["sh", "-c", script, "sh", *args],
        input="in:",
        cwd="/tmp",
        env={"MARK": "set"},
    )
    assert result.returncode == 0, result.stderr
    digest = hashlib.sha256("".join(args).encode()).hexdigest()
    assert result.stdout == f"in:/tmp|set|{digest}  -\n"
    assert await _argv_files(env) == "0"  # bash removed the file before the exec


async def test_past_the_kernels_limit_is_its_e2big(env: SandboxEnvironment) -> None:
    # More than execve takes even with an unlimited stack (6 MiB).
    result = await env.exec(["printf", "%s", *([CHUNK] * 112)])
    assert result.returncode == 126
    assert "Argument list too long" in result.stderr
    assert await _argv_files(env) == "0"


async def test_one_argument_past_the_kernels_is_sandboxds_typed_refusal(
    env: SandboxEnvironment,
) -> None:
    box = env.as_type(SandboxdSandboxEnvironment)
    with pytest.raises(InvalidArgument, match="bytes per argument"):
        await box.exec(["printf", "%s", "y" * MAX_ARG_STRLEN, *([CHUNK] * 16)])
    assert await _argv_files(env) == "0"

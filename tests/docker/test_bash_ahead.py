"""bash's shell started ahead of each call, in real containers (runc and runsc).

The mechanism must be live where it matters: under privilege separation
(the executor root, the shell the sandbox user) and under gVisor (sealed
memfds, /proc status). A shell that served a call was started before the
call arrived, so its age at the call is about the pause between calls; a
spawned one is a few milliseconds old. Killing it from the workload costs
nothing but the head start.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from runtime_client import GrpcSandboxFactory, NotFound, Runtime, SandboxOptions

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

# The shell's age in ms: now (/proc/uptime) minus its start (/proc/$$/stat, field 22).
AGE = (
    "read -r up _ < /proc/uptime; read -r -a st < /proc/$$/stat; "
    'hz=$(getconf CLK_TCK); echo "age $(( ${up/./}0 - ${st[21]} * 1000 / hz ))"; '
    "id -u; ps -o user=,args= -p $$"
)


def _age_ms(text: str) -> int:
    return int(next(line for line in text.splitlines() if line.startswith("age "))[4:])


@pytest.mark.parametrize("runtime", [Runtime.RUNC, Runtime.RUNSC])
async def test_the_shell_is_started_ahead_as_the_sandbox_user(
    factory: GrpcSandboxFactory, instance_id: str, runtime: Runtime
) -> None:
    await factory.transport.create_sandbox(instance_id, SandboxOptions(runtime=runtime))
    try:
        box = await factory.create_sandbox(instance_id)
        await box.bash("cd /tmp && export KEPT=yes")
        await asyncio.sleep(1.5)
        result = await box.bash(AGE + '; pwd; echo "$KEPT"')
        lines = result.text.splitlines()
        assert not result.is_error, result.text
        assert _age_ms(result.text) >= 1000, result.text  # waited through the pause
        assert lines[1] == "1000"  # the sandbox user, not the executor's root
        assert lines[-4:-2] == ["/tmp", "yes"]  # state carried into the shell started ahead

        # The workload kills every process it may: the next call spawns afresh.
        await box.bash("pkill -KILL -u 1000 -f 'bash -c' || true")
        await asyncio.sleep(0.5)
        again = await box.bash("echo alive; pwd")
        assert again.text.startswith("alive\n/tmp\n"), again.text
    finally:
        with contextlib.suppress(NotFound):
            await factory.transport.delete_sandbox(instance_id)


# A background job of the workload waits for the shell started ahead, then
# tries to say "go" to it through /proc (the go pipe is the executor's).
FORGE = (
    "sleep 3; p=$(pgrep -u 1000 -f '__sbx_[i]n=' | head -1); "
    "fd=$(tr '\\0' ' ' < /proc/$p/cmdline | awk '{print $(NF-1)}'); "
    'if [ -z "$p" ]; then echo none > forge.out; '
    "elif echo g > /proc/$p/fd/$fd; then echo FORGED > forge.out; "
    "else echo refused > forge.out; fi"
)


@pytest.mark.parametrize("runtime", [Runtime.RUNC, Runtime.RUNSC])
async def test_the_workload_cannot_say_go(
    factory: GrpcSandboxFactory, instance_id: str, runtime: Runtime
) -> None:
    await factory.transport.create_sandbox(instance_id, SandboxOptions(runtime=runtime))
    try:
        box = await factory.create_sandbox(instance_id)
        await box.bash(FORGE, run_in_background=True)
        await box.bash("true")  # the next call's shell starts now, and waits
        await asyncio.sleep(5)
        result = await box.bash("cat forge.out")
        assert result.text.startswith("refused\n"), result.text
    finally:
        with contextlib.suppress(NotFound):
            await factory.transport.delete_sandbox(instance_id)

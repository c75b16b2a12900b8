"""Writing into the executor's channel from inside the sandbox.

The executor and sandboxd's own PID 1 (which replaced docker's init, after
this suite showed that docker-init held the channel's pipes, dumpable, as the
sandbox user) are non-dumpable, and PID 1 closes its copy of the channel: no
/proc/<pid>/fd path leads into it.
"""

from __future__ import annotations

import pytest

from runtime_client import Sandbox
from tests.helpers import Daemon
from tests.hostile.support import (
    Bystander,
    assert_serving,
    executor_pid,
    record,
)

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(90)]

# Replies for every request id a young channel may be waiting on: each claims
# to be an Exec result with stdout "FORGED\n".
FORGE = (
    "for i in $(seq 1 3000); do "
    'printf \'{"id":%d,"ok":{"stdout_base64":"Rk9SR0VECg==","stderr_base64":"",'
    '"exit_code":0,"timed_out":false,"duration_ms":1}}\\n\' $i; '
    "done > /proc/1/fd/1; sleep 1; echo real"
)


async def test_the_executor_stdio_is_not_openable(attacked: Sandbox) -> None:
    pid = executor_pid((await attacked.exec("cat /proc/1/task/1/children")).stdout)
    probe = await attacked.exec(
        f"for fd in 0 1 2; do (: > /proc/{pid}/fd/$fd) 2>&1 | grep -c 'Permission denied'; done"
    )
    assert probe.stdout == b"1\n1\n1\n"


async def test_garbage_cannot_be_written_into_the_channel(
    daemon: Daemon, attacked: Sandbox, bystander: Bystander
) -> None:
    quiet = await bystander.p99_ms()
    # Every process that holds the channel (PID 1, the executor) is non-dumpable,
    # so the garbage never gets in; the daemon's frame checks (tests/unit/
    # test_channel.py) are the second line.
    probe = await attacked.exec(
        "for target in /proc/1/fd/1 /proc/1/fd/0; do "
        "(head -c 1000000 /dev/urandom > $target) 2>&1 | grep -c 'Permission denied'; done"
    )
    assert probe.stdout == b"1\n1\n"
    during = await bystander.p99_ms()
    assert (await attacked.exec("echo alive")).stdout == b"alive\n"
    await assert_serving(daemon.target)
    await record(
        bystander,
        "garbage into the channel via /proc/1/fd",
        quiet,
        during,
        outcome="refused: EACCES (PID 1 and the executor are non-dumpable)",
    )


async def test_pid1_does_not_expose_the_channel(attacked: Sandbox) -> None:
    probe = await attacked.exec("(: > /proc/1/fd/1) 2>&1 | grep -c 'Permission denied'")
    assert probe.stdout == b"1\n"


async def test_a_forged_reply_is_not_accepted(attacked: Sandbox) -> None:
    result = await attacked.exec(FORGE, timeout_ms=30_000)
    assert result.stdout == b"real\n"

"""The executor channel on a real engine: direct under runc, attach where it must.

An in-process DockerBackend (``open_workspace``: a real engine, the real
image) so the test can see which channel each workspace uses
(``DockerWorkspace.channel_kind``, also the ``sandboxd_executor_channels``
metric).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import sys
import time

import anyio
import docker
import pytest
from prometheus_client import REGISTRY

from sandboxd.backends.docker.direct import executor_gone
from sandboxd.backends.docker.workspace import DockerWorkspace
from sandboxd.backends.shared.session import hello_args
from sandboxd.contract.models import Runtime
from tests.docker_fixtures import IMAGE, RUN_PREFIX
from tests.docker_fixtures import OpenWorkspace as Open

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]


async def _executor_pid(workspace: DockerWorkspace) -> int:
    # The executor's own pid (inside the container), from a fresh hello.
    args = hello_args(workspace._options, workspace._settings)
    return int((await workspace.call("hello", args))["pid"])


def _direct_count() -> float:
    value = REGISTRY.get_sample_value("sandboxd_executor_channels_total", {"kind": "direct"})
    return value or 0.0


async def test_a_runc_workspace_talks_over_the_direct_channel(open_workspace: Open) -> None:
    before = _direct_count()
    workspace = await open_workspace()
    assert workspace.channel_kind == "direct"
    assert _direct_count() == before + 1
    result = await workspace.call("exec", {"argv": ["id", "-u"]})
    assert result["stdout"] == b"1000\n"
    # Raw frames both ways, bigger than a socket buffer.
    data = os.urandom(3 << 20)
    await workspace.call("write_file", {"path": "big.bin", "data": data})
    assert (await workspace.call("read_file", {"path": "big.bin"}))["data"] == data


async def test_reattaching_moves_to_the_direct_channel_again(open_workspace: Open) -> None:
    workspace = await open_workspace()
    pid = await _executor_pid(workspace)
    for _ in range(3):
        await workspace.disconnect()
        await workspace.ensure_running()
        assert workspace.channel_kind == "direct"
        # The same executor: the attach stream that was let go of left its stdin open.
        assert await _executor_pid(workspace) == pid
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"
    # A live executor is one (the reconnects above did not wait for a stop).
    assert not executor_gone(workspace.container.attrs["State"]["Pid"])


async def test_a_dead_executor_is_seen_gone_from_the_host(open_workspace: Open) -> None:
    workspace = await open_workspace()
    host_pid = workspace.container.attrs["State"]["Pid"]
    pid = await _executor_pid(workspace)
    # From the host: the kernel ignores SIGSTOP sent to a pid namespace's
    # init from inside it.
    os.kill(host_pid, signal.SIGSTOP)
    try:
        # The init is stopped, so the container stays up with its executor dead.
        await anyio.to_thread.run_sync(
            lambda: workspace.container.exec_run(["kill", "-KILL", str(pid)], user="0")
        )
        deadline = time.monotonic() + 10
        while not executor_gone(host_pid):
            assert time.monotonic() < deadline, "the killed executor still shows"
            await anyio.sleep(0.02)
    finally:
        os.kill(host_pid, signal.SIGCONT)
    await workspace.disconnect()
    await workspace.ensure_running()
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"


async def test_a_restarted_container_gets_a_new_direct_channel(open_workspace: Open) -> None:
    workspace = await open_workspace()
    await workspace.call("write_file", {"path": "kept.txt", "data": b"kept"})
    await workspace.restart()
    assert workspace.channel_kind == "direct"
    assert (await workspace.call("read_file", {"path": "kept.txt"}))["data"] == b"kept"


async def test_the_setting_keeps_the_attach_stream(open_workspace: Open) -> None:
    workspace = await open_workspace(direct_channel=False)
    assert workspace.channel_kind == "attach"
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"


async def test_gvisor_stays_on_the_attach_stream(open_workspace: Open) -> None:
    workspace = await open_workspace(Runtime.RUNSC)
    assert workspace.channel_kind == "attach"
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"


async def test_the_executors_log_lines_still_reach_the_daemon(
    open_workspace: Open, caplog: pytest.LogCaptureFixture
) -> None:
    # Only calls moved to the socket: the executor's stderr still comes over
    # the attach stream, kept open for it.
    caplog.set_level(logging.WARNING, logger="sandboxd.backends.docker.attach")
    workspace = await open_workspace()
    assert workspace.channel_kind == "direct"
    channel = await workspace.ensure_running()
    await channel.send_raw(b"not a frame\n")
    deadline = time.monotonic() + 30
    while "dropped a malformed frame" not in caplog.text:
        assert time.monotonic() < deadline, caplog.text
        await anyio.sleep(0.05)
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"


NO_HOST_PIDS = """
import asyncio, logging, sys
from sandboxd.backends.docker.backend import DockerBackend
from sandboxd.daemon.settings import Settings
from sandboxd.contract.models import SandboxOptions
from sandboxd.backends.shared.options import effective

logging.basicConfig(level=logging.INFO)

async def main():
    settings = Settings(namespace=sys.argv[1], image=sys.argv[2], pool_size=0, disk_bytes=0)
    backend = DockerBackend(settings)
    await backend.start()
    try:
        options = effective(SandboxOptions(), settings)
        await backend.create("nopids", options, options)
        workspace = await backend.workspace("nopids")
        await workspace.ensure_running()
        result = await workspace.call("exec", {"argv": ["echo", "ok"]})
        print(workspace.channel_kind, result["stdout"].decode().strip())
    finally:
        await backend.delete("nopids")
        await backend.close()

asyncio.run(main())
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
async def test_a_daemon_without_the_hosts_pid_namespace_stays_on_attach(
    docker_client: docker.DockerClient,
) -> None:
    # As a sidecar without --pid host: /proc shows another pid namespace.
    namespace = f"{RUN_PREFIX}-nopids-{secrets.token_hex(2)}"
    argv = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", NO_HOST_PIDS]
    result = await anyio.run_process([*argv, namespace, IMAGE], check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().split() == ["attach", "ok"]
    assert b"executor channel stays on attach: cannot open /proc/" in result.stderr


async def test_a_slow_read_on_the_reader_thread_does_not_hold_up_other_calls(
    open_workspace: Open,
) -> None:
    # read runs on the connection's reader thread (no hop to a worker); a read
    # the workload made slow (a page deep in a big file) must not stall the
    # channel: the executor's watchdog hands the reading to a new thread.
    workspace = await open_workspace()
    assert workspace.channel_kind == "direct"

    async def tool(name: str, **args: object) -> dict[str, object]:
        return await workspace.call("tool", {"name": name, "args": args})

    # 30 million empty lines: the last page is seconds of reading, line by line.
    made = await tool(
        "bash", command="head -c 30000000 /dev/zero | tr '\\0' '\\n' > big; echo x > small"
    )
    assert not made["is_error"] and made["text"].endswith("Exit code: 0"), made
    far: list[float] = []
    quick: list[float] = []
    pages: list[object] = []

    async def far_pages() -> None:
        while not quick or len(quick) < 5 or len(far) < 2:
            started = time.monotonic()
            pages.append((await tool("read", file_path="big", offset=29_999_999, limit=5))["text"])
            far.append(time.monotonic() - started)

    async with anyio.create_task_group() as group:
        group.start_soon(far_pages)
        await anyio.sleep(0.2)
        for _ in range(5):
            started = time.monotonic()
            assert (await tool("read", file_path="small"))["text"] == "     1\tx"
            quick.append(time.monotonic() - started)
    assert all(str(page).startswith("29999999\t\n30000000\t") for page in pages), pages[0]
    # Each quick read waited for the watchdog at most, never for a far page.
    assert max(quick) < min(far) / 2, (quick, far)
    assert sorted(quick)[2] < min(far) / 4, (quick, far)

"""Attacks on the direct channel (the executor's unix socket, executor.direct).

The workload (the sandbox user) must not reach the socket at all. A root
process inside the container (``docker exec -u 0`` stands in for a workload
that broke out to root) may replace the socket with its own listener or with
a symlink to a host socket, or a folder on the way with a symlink to a host
folder: the walk follows no symlink and the peer check refuses a listener
before one byte is sent, and the workspace keeps working over the attach
stream. Root flooding the socket with connections must not take the live channel down.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from pathlib import Path

import anyio
import pytest

from sandboxd.backends.docker.workspace import DockerWorkspace
from tests.docker_fixtures import OpenWorkspace

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]

CONNECT = (
    "import glob, socket\n"
    "for path in glob.glob('/run/sandboxd/*/s') or ['/run/sandboxd/{dir}/s']:\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try:\n"
    "        s.connect(path)\n"
    "        print('connected')\n"
    "    except OSError as exc:\n"
    "        print(type(exc).__name__)\n"
)

FAKE_LISTENER = (
    "import os, socket, time\n"
    "path = '/run/sandboxd/{dir}/s'\n"
    "os.unlink(path)\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.bind(path)\n"
    "s.listen(8)\n"
    "open('/run/sandboxd/{dir}/ready', 'w').close()\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    '    c.sendall(b\'{{"id":1,"ok":{{}}}}\\n\')\n'
)


async def _socket_dir(workspace: DockerWorkspace) -> str:
    listing = (await workspace.call("exec", {"argv": ["ls", "/run/sandboxd"]}))["stdout"]
    names: list[bytes] = re.findall(rb"^[0-9a-f]{16}$", listing, re.MULTILINE)
    assert len(names) == 1, listing
    return names[0].decode()


async def _as_root(workspace: DockerWorkspace, script: str, *, detach: bool = False) -> str:
    """Run a python script as root inside the container (not as the workload)."""

    def run() -> str:
        _, output = workspace.container.exec_run(["python3", "-c", script], user="0", detach=detach)
        return "" if detach else output.decode()

    return await anyio.to_thread.run_sync(run)


async def _reconnect(workspace: DockerWorkspace) -> None:
    await workspace.disconnect()
    await workspace.ensure_running()


async def test_the_sandbox_user_cannot_reach_the_socket(open_workspace: OpenWorkspace) -> None:
    workspace = await open_workspace()
    assert workspace.channel_kind == "direct"
    folder = await _socket_dir(workspace)
    probe = await workspace.call("exec", {"argv": ["python3", "-c", CONNECT.format(dir=folder)]})
    assert probe["stdout"] == b"PermissionError\n"
    listing = await workspace.call(
        "exec",
        {
            "argv": [
                "sh",
                "-c",
                f"ls /run/sandboxd/{folder} 2>&1; stat -c %a:%u /run/sandboxd/{folder}",
            ]
        },
    )
    assert b"Permission denied" in listing["stdout"]
    assert listing["stdout"].endswith(b"700:0\n")
    # And the workload cannot plant anything beside it.
    plant = await workspace.call(
        "exec", {"argv": ["sh", "-c", "mkdir /run/sandboxd/x 2>&1; echo $?"]}
    )
    assert plant["stdout"].endswith(b"1\n")


async def test_a_fake_listener_of_in_container_root_is_refused(
    open_workspace: OpenWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sandboxd.backends.docker.workspace")
    workspace = await open_workspace()
    folder = await _socket_dir(workspace)
    await _as_root(workspace, FAKE_LISTENER.format(dir=folder), detach=True)
    deadline = time.monotonic() + 30
    while (
        b"ready"
        not in (
            await _as_root(workspace, f"import os; print(os.listdir('/run/sandboxd/{folder}'))")
        ).encode()
    ):
        assert time.monotonic() < deadline, "the fake listener did not start"
        await anyio.sleep(0.1)
    await _reconnect(workspace)
    # Root, but not the executor (not a child of the container's init): refused,
    # and the workspace serves over the attach stream.
    assert workspace.channel_kind == "attach"
    assert "is not a child of the container's init" in caplog.text
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"


async def test_a_symlink_to_a_host_socket_is_not_followed(
    open_workspace: OpenWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sandboxd.backends.docker.workspace")
    workspace = await open_workspace()
    folder = await _socket_dir(workspace)
    # Absolute, so under /proc/<pid>/root it would resolve on the HOST.
    await _as_root(
        workspace,
        f"import os; p = '/run/sandboxd/{folder}/s'; os.unlink(p); "
        "os.symlink('/var/run/docker.sock', p)",
    )
    await _reconnect(workspace)
    assert workspace.channel_kind == "attach"
    assert f"/run/sandboxd/{folder}/s is not a socket" in caplog.text
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"


async def test_a_symlinked_folder_to_a_host_socket_is_not_entered(
    open_workspace: OpenWorkspace, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG, logger="sandboxd.backends.docker.workspace")
    workspace = await open_workspace()
    folder = await _socket_dir(workspace)
    # A host folder with a listening "s": the socket's own folder in the
    # container becomes an absolute symlink to it, which a plain walk under
    # /proc/<pid>/root would follow on the HOST and connect to.
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    host = socket.socket(socket.AF_UNIX)
    handle = os.open(host_dir, os.O_PATH)
    host.bind(f"/proc/self/fd/{handle}/s")  # a unix path holds 107 bytes
    os.close(handle)
    host.listen(1)
    host.setblocking(False)
    try:
        await _as_root(
            workspace,
            f"import os; d = '/run/sandboxd/{folder}'; os.rename(d, d + '.moved'); "
            f"os.symlink({str(host_dir)!r}, d)",
        )
        await _reconnect(workspace)
        assert workspace.channel_kind == "attach"
        assert "Too many levels of symbolic links" in caplog.text
        with pytest.raises(BlockingIOError):
            host.accept()  # never connected to
        assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"
    finally:
        host.close()


async def test_a_flood_of_connections_leaves_the_channel_serving(
    open_workspace: OpenWorkspace,
) -> None:
    workspace = await open_workspace()
    folder = await _socket_dir(workspace)
    flood = (
        "import socket\n"
        "held = []\n"
        "for _ in range(200):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    s.settimeout(1)\n"
        "    try:\n"
        f"        s.connect('/run/sandboxd/{folder}/s')\n"
        "        s.sendall(b'garbage\\n' * 100)\n"
        "    except OSError:\n"
        "        pass\n"
        "    held.append(s)\n"
        "print('flooded')\n"
    )
    assert "flooded" in await _as_root(workspace, flood)
    assert workspace.channel_kind == "direct"
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"
    # The executor still accepts its daemon after the flood.
    await _reconnect(workspace)
    assert workspace.channel_kind == "direct"
    assert (await workspace.call("exec", {"argv": ["echo", "ok"]}))["stdout"] == b"ok\n"

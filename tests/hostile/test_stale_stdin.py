"""A live but silent executor restarted with stale bytes in its stdin
(issue 23, item 15), through the real engine, under runc and gVisor.

While the executor is alive but silent (stopped here; wedged in life), a
client's upload of 4 MiB of forged bundles goes into the container's stdin
and stays unread; then the sandbox is restarted (RestartSandbox, then a
daemon restart that re-attaches, finds the executor silent and restarts
it). The bootstrap took the first all-digit line of stdin for the bundle's
length, so stale bytes could be run as the executor, as root
(tests/unit/test_bundle.py shows it with stale bytes in a pipe). Every
Docker container's bootstrap now says a nonce on stdout and takes only a
bundle whose header carries it, with the bundle's sha256: the restarts
here start the real executor, and nothing forged runs.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path

import anyio
import docker
import pytest

from runtime_client import GrpcSandboxFactory, SandboxUnavailable
from sandboxd.backends.shared import labels
from sandboxd.contract.models import Runtime, SandboxOptions
from tests.docker_fixtures import IMAGE, RUN_PREFIX, remove_namespace_resources
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]

#: A "bundle" whose executor only says who runs it, on stderr (which the
#: daemon quotes when the executor does not start), then exits.
_FORGED = json.dumps(
    {
        "sandboxd": [True, ""],
        "sandboxd.executor": [True, ""],
        "sandboxd.executor.main": [
            False,
            "import os, sys\n"
            "sys.stderr.write(f'FORGED BUNDLE RAN uid={os.getuid()}\\n')\n"
            "sys.stderr.flush()\n"
            "os._exit(3)\n",
        ],
    }
).encode()
_BLOCK = b"\n" + str(len(_FORGED)).encode() + b"\n" + _FORGED + b"\n"
#: 4 MiB of forged bundles: the stopped executor's pipe takes the first MiB
#: (lost with the old container), the rest waits in the engine's buffers and
#: is handed to the next start.
PAYLOAD = _BLOCK * ((4 << 20) // len(_BLOCK))


def _stop_executor(client: docker.DockerClient, name: str) -> None:
    """SIGSTOP the executor (the init's oldest child) from inside, as root."""
    container = client.containers.get(name)
    code, out = container.exec_run(["sh", "-c", "kill -STOP $(pgrep -o -P 1)"], user="0")
    assert code == 0, out


@pytest.mark.parametrize("runtime", [Runtime.RUNC, Runtime.RUNSC], ids=lambda r: r.value)
async def test_stale_stdin_is_not_taken_for_the_bundle(
    daemon_factory: type[Daemon],
    docker_client: docker.DockerClient,
    tmp_path: Path,
    runtime: Runtime,
) -> None:
    namespace = f"{RUN_PREFIX}-st{secrets.token_hex(2)}"
    # The attach stream carries every call (under runc the direct socket would).
    args = ("--namespace", namespace, "--image", IMAGE, "--pool-size", "0")
    env = {"SANDBOXD_DIRECT_CHANNEL": "0", "SANDBOXD_START_TIMEOUT_S": "20"}
    options = SandboxOptions(runtime=runtime)
    try:
        first = await anyio.to_thread.run_sync(
            daemon_factory(tmp_path / "a.sock", *args, env=env).start
        )
        name = labels.resource_name(namespace, "stale")
        async with GrpcSandboxFactory(first.target, options=options) as factory:
            box = await factory.create_sandbox("stale")
            await box.write_file("kept.txt", "kept")
            await anyio.to_thread.run_sync(_stop_executor, docker_client, name)
            # Sent into stdin, never read by the stopped executor.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(box.upload("upload.bin", PAYLOAD), 5)
            await box.restart()
            assert (await box.read_file("kept.txt")).data == b"kept"
            await anyio.to_thread.run_sync(_stop_executor, docker_client, name)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(box.upload("upload.bin", PAYLOAD), 5)
        await anyio.to_thread.run_sync(first.kill)
        second = await anyio.to_thread.run_sync(
            daemon_factory(tmp_path / "b.sock", *args, env=env).start
        )
        async with GrpcSandboxFactory(second.target, options=options) as factory:
            # Re-attach, no hello from the stopped executor, restart, new bundle.
            try:
                box = await factory.create_sandbox("stale")
                kept = await box.read_file("kept.txt")
            except SandboxUnavailable as exc:
                raise AssertionError(f"the restart failed: {exc}") from exc
            assert kept.data == b"kept"
            ran = await box.exec(["id", "-u"])
            assert ran.stdout == b"1000\n", ran
            log = await anyio.Path(tmp_path / "b.log").read_text()
            assert "FORGED" not in log, log
    finally:
        await anyio.to_thread.run_sync(remove_namespace_resources, docker_client, namespace)

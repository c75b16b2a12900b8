"""`sandboxctl port-forward` and `sandboxctl ports` as a person uses them:
a real sandboxctl process, curl on the local port, ^C to stop."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
import sys
import time

import pytest

from runtime_client import GrpcSandboxFactory
from tests.ecosystem.conftest import free_port
from tests.helpers import ROOT, Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio, pytest.mark.timeout(120)]


def _ctl(daemon: Daemon, *args: str) -> list[str]:
    return [sys.executable, "-m", "sandboxd.ctl", "--target", daemon.target, *args]


async def test_port_forward_then_curl_then_ctrl_c(local_daemon: Daemon) -> None:
    name = f"ctl-{secrets.token_hex(3)}"
    remote = free_port()
    async with GrpcSandboxFactory(local_daemon.target) as factory:
        box = await factory.create_sandbox(name)
        await box.write_file("index.html", b"hello through port-forward\n")
        await box.start_process(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(remote)]
        )
        deadline = time.monotonic() + 20
        while remote not in {p.port for p in await box.list_ports()}:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)

        listed = await asyncio.to_thread(
            subprocess.run,
            _ctl(local_daemon, "ports", name, "--json"),
            capture_output=True,
            cwd=ROOT,
            check=True,
        )
        assert {"host": "127.0.0.1", "port": remote} in json.loads(listed.stdout)

        local = free_port()
        forward = await asyncio.to_thread(
            subprocess.Popen,
            _ctl(local_daemon, "port-forward", name, f"{local}:{remote}"),
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            assert forward.stderr is not None
            line = await asyncio.to_thread(forward.stderr.readline)
            assert f"Forwarding from 127.0.0.1:{local} -> {name}:{remote}" in line.decode()
            for _ in range(3):  # one stream per connection, the forward stays up
                curl = await asyncio.to_thread(
                    subprocess.run,
                    ["curl", "-sS", f"http://127.0.0.1:{local}/index.html"],
                    capture_output=True,
                    timeout=30,
                )
                assert curl.stdout == b"hello through port-forward\n", curl.stderr
            forward.send_signal(signal.SIGINT)
            assert await asyncio.to_thread(forward.wait, 20) == 0
        finally:
            if forward.poll() is None:
                forward.kill()
        await box.delete()


def test_port_forward_refuses_a_bad_spec(local_daemon: Daemon) -> None:
    bad = subprocess.run(
        _ctl(local_daemon, "port-forward", "x", "80:http"), capture_output=True, cwd=ROOT
    )
    assert bad.returncode == 2
    assert b"[LOCAL:]REMOTE" in bad.stderr

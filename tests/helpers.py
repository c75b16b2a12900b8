"""Helpers shared by the test tiers: daemon processes, health probes, waiting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]

#: The interpreter of every ``sandboxd serve`` a test starts: this one, or
#: where the client is tested on a Python the daemon does not run on
#: (scripts/pythons.py on 3.10), one that it does.
DAEMON_PYTHON = os.environ.get("SANDBOXD_TEST_DAEMON_PYTHON") or sys.executable


def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> bool:
    """Whether ``condition()`` became true within ``timeout`` (polled every 10 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def health_status(target: str, timeout: float = 2.0) -> str:
    with grpc.insecure_channel(target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout
        )
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


#: The disk of every docker-tier test workspace (issue 15: small disks by
#: default, so that a test needing more says so).
TEST_DISK_BYTES = 64 << 20


class Daemon:
    """``sandboxd serve`` as a real child process."""

    def __init__(
        self,
        socket: Path,
        *args: str,
        env: dict[str, str] | None = None,
        test_disks: bool = True,
        program: Sequence[str] = (),
    ) -> None:
        self.socket = socket
        self.target = f"unix://{socket}"
        self.log = socket.with_suffix(".log")
        self._args = args
        # What runs `serve`: the source tree's sandboxd, or e.g. an installed console script.
        self._program = list(program) or [DAEMON_PYTHON, "-m", "sandboxd"]
        self._env = {
            # A test daemon keeps its disk images beside its socket, and its
            # workspaces get the docker tier's 64 MiB disks unless told otherwise
            # (flags and ``env`` win; the local backend has no disks).
            "SANDBOXD_DISK_DIR": str(socket.parent / "disks"),
            # Its egress CA too (not the host's /var/lib/sandboxd).
            "SANDBOXD_STATE_DIR": str(socket.parent / "state"),
            "SANDBOXD_DISK_BYTES": str(TEST_DISK_BYTES),
            **os.environ,
            **(env or {}),
        }
        if not test_disks:  # the product's default size
            self._env.pop("SANDBOXD_DISK_BYTES")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> Daemon:
        log = self.log.open("ab")
        self.proc = subprocess.Popen(
            [*self._program, "serve", "--socket", str(self.socket), *self._args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self._env,
            cwd=ROOT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sandboxd exited early:\n{self.log.read_text()}")
            try:
                if health_status(self.target, timeout=0.5) == "SERVING":
                    return self
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"sandboxd did not become healthy:\n{self.log.read_text()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

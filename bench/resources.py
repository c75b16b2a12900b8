"""Everything the bench creates, and the one place that removes it all.

The daemon runs in its own session (a Ctrl-C reaches only the bench, which
then stops it). Containers and volumes are found by label, never by name
patterns: the daemon's by its private namespace, the bench's own (raw
exec, bare ``docker run``, SWE-ReX) by ``sandboxd.bench.run=<run id>``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sandboxd.backends.docker import disk

ROOT = Path(__file__).resolve().parents[1]
RUN_LABEL = "sandboxd.bench.run"
IMAGE = "sandboxd-workspace:latest"


class Daemon:
    """``python -m sandboxd serve`` as a child process in its own session."""

    def __init__(self, socket: Path, namespace: str, *args: str) -> None:
        self.socket = socket
        self.target = f"unix://{socket}"
        self.namespace = namespace
        self.log = socket.with_suffix(".log")
        self._args = args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> Daemon:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "sandboxd", "serve",
                    "--socket", str(self.socket),
                    "--namespace", self.namespace,
                    "--drain-seconds", "2",
                    "--log-level", "WARNING",
                    *self._args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sandboxd exited early:\n{self.log.read_text()}")
            with contextlib.suppress(grpc.RpcError):
                if _health(self.target) == "SERVING":
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"sandboxd did not become healthy:\n{self.log.read_text()}")

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _health(target: str) -> str:
    with grpc.insecure_channel(target) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=0.5
        )
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Resources:
    """The run's id, scratch folder, Docker client and daemon; ``close`` undoes all."""

    def __init__(self) -> None:
        self.run_id = secrets.token_hex(4)
        self.namespace = f"bench-{self.run_id}"
        self.tmp = Path(tempfile.mkdtemp(prefix=f"sandboxd-bench-{self.run_id}-"))
        self.docker = docker.from_env(timeout=120)
        self.daemons: list[Daemon] = []
        #: Namespaces of backends run inside the bench process (bench.layers).
        self.extra_namespaces: list[str] = []
        #: Image tags the run built (bench.image_ab); untagged at the end.
        self.images: list[str] = []
        self.labels = {RUN_LABEL: self.run_id}
        #: Undone at close, after the daemons stop (bench.kubernetes: its namespace).
        self.cleanups: list[Callable[[], None]] = []

    def start_daemon(self, *args: str, suffix: str = "", timeout: float = 60.0) -> Daemon:
        """A daemon in namespace ``bench-<run id><suffix>``, on its own socket."""
        namespace = self.namespace + suffix
        daemon = Daemon(self.tmp / f"{namespace}.sock", namespace, *args)
        self.daemons.append(daemon)
        return daemon.start(timeout)

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.stop()
        for cleanup in self.cleanups:
            with contextlib.suppress(Exception):
                cleanup()
        removed = 0
        selectors = [[f"{RUN_LABEL}={self.run_id}"]]
        selectors += [[f"sandboxd.namespace={d.namespace}"] for d in self.daemons]
        selectors += [[f"sandboxd.namespace={n}"] for n in self.extra_namespaces]
        for selector in selectors:
            with contextlib.suppress(docker.errors.DockerException):
                for container in self.docker.containers.list(all=True, filters={"label": selector}):
                    with contextlib.suppress(docker.errors.DockerException):
                        container.remove(force=True)
                        removed += 1
            with contextlib.suppress(docker.errors.DockerException):
                for volume in self.docker.volumes.list(filters={"label": selector}):
                    with contextlib.suppress(docker.errors.DockerException):
                        image = (volume.attrs.get("Labels") or {}).get(disk.DISK_LABEL)
                        volume.remove(force=True)
                        removed += 1
                        if image:  # a workspace's own disk: its loop device and image too
                            disk.remove(Path(image))
        for tag in self.images:
            with contextlib.suppress(docker.errors.DockerException):
                self.docker.images.remove(tag)
                removed += 1
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.docker.close()
        print(
            f"[bench] cleaned up: {removed} container(s)/volume(s)/image tag(s), {self.tmp}",
            file=sys.stderr,
        )


def interrupt_on_sigterm() -> None:
    """SIGTERM behaves like Ctrl-C, so ``finally`` blocks clean up either way."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")

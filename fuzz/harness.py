"""An in-process sandboxd (local backend, temporary root) on its own thread,
and the one check every fuzzed call must pass."""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.daemon.assembly import Daemon
from sandboxd.daemon.settings import Settings

#: Every status the contract allows (proto/sandboxd/v1/sandbox.proto). Never
#: UNKNOWN or INTERNAL: those mean the daemon failed to type an error.
ALLOWED = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAVAILABLE,
    }
)
#: Instances created up front, so that most calls reach a real workspace.
KNOWN_IDS = ("fz-a", "fz-b")
#: Files every known instance starts with (fuzz.strategies.COMMON names them).
SEED_FILES = ("f.txt", "dir/f.txt", "a b/ü.txt", "dir/sub/deep.txt")
PAYLOAD_LIMIT = 64 * 1024
#: How each streaming RPC is called (the rest are unary).
SERVER_STREAMS = frozenset({"ExecStream", "Download", "DownloadTree"})
CLIENT_STREAMS = frozenset({"Upload", "UploadTree"})
BIDI_STREAMS = frozenset({"ToolCalls", "ConnectProcess", "OpenPorts"})
#: Streams whose items answer one piece of work each, with its own status.
IN_BAND_ERRORS = frozenset({"ToolCalls", "OpenPorts"})
CALL_TIMEOUT_S = 60.0


class FuzzServer:
    def __init__(self, folder: Path) -> None:
        self.settings = Settings(
            backend="local",
            local_root=folder / "root",
            socket=folder / "sandboxd.sock",
            max_payload_bytes=PAYLOAD_LIMIT,
            max_output_bytes=PAYLOAD_LIMIT,
            exec_timeout_ms=10_000,
            drain_seconds=1,
        )
        self.calls = 0
        self.statuses: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Daemon | None = None
        self._channel: grpc.Channel | None = None

    async def _start_server(self) -> Daemon:
        # grpc.aio binds a server to the loop it is created on: create it there.
        server = Daemon(self.settings)
        await server.start()
        return server

    def start(self) -> FuzzServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start_server(), self._loop)
        self._server = future.result(30)
        self._channel = grpc.insecure_channel(f"unix://{self.settings.socket}")
        self.stub = pb_grpc.SandboxServiceStub(self._channel)  # type: ignore[no-untyped-call]
        # Every service's stub by method name: RPCs of other services (Lifetimes) too.
        self._stubs = {
            method.name: getattr(pb_grpc, f"{service.name}Stub")(self._channel)
            for service in pb.DESCRIPTOR.services_by_name.values()
            for method in service.methods
        }
        for instance_id in KNOWN_IDS:
            self.stub.CreateSandbox(pb.CreateSandboxRequest(instance_id=instance_id))
            for path in SEED_FILES:
                self.stub.WriteFile(
                    pb.WriteFileRequest(
                        instance_id=instance_id,
                        path=path,
                        data=b"first line\nsecond line x\n",
                        create_parents=True,
                    )
                )
        return self

    def stop(self) -> None:
        if self._channel is not None:
            self._channel.close()
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def call(self, method: str, request: Any) -> Any:
        """Send one request; any status outside ``ALLOWED`` fails the example."""
        self.calls += 1
        rpc = getattr(self._stubs[method], method)
        try:
            if method in SERVER_STREAMS:
                reply: Any = list(rpc(request, timeout=CALL_TIMEOUT_S))
            elif method in CLIENT_STREAMS:  # the request is the list of messages sent
                reply = rpc(iter(request), timeout=CALL_TIMEOUT_S)
            elif method in BIDI_STREAMS:
                reply = list(rpc(iter(request), timeout=CALL_TIMEOUT_S))
                if method in IN_BAND_ERRORS:
                    self._check_in_band(method, request, reply)
            else:
                reply = rpc(request, timeout=CALL_TIMEOUT_S)
            code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            reply, code = None, exc.code()
            details = exc.details()
        self.statuses[f"{method} {code.name}"] += 1
        if code not in ALLOWED:
            message = f"{method} answered {code.name}: {details}\nrequest: {request!r:.2000}"
            self.failures.append(message)
            raise AssertionError(message)
        return reply

    def _check_in_band(self, method: str, request: Any, reply: list[Any]) -> None:
        answers = [a for r in reply for a in (r.batch if method == "ToolCalls" else ()) or [r]]
        for answer in answers:
            if not answer.HasField("error"):
                continue
            code = grpc.StatusCode[answer.error.code]
            self.statuses[f"{method} (in band) {code.name}"] += 1
            if code not in ALLOWED:
                message = (
                    f"{method} answered {code.name} in band: {answer.error.message}\n"
                    f"request: {request!r:.2000}"
                )
                self.failures.append(message)
                raise AssertionError(message)

    def healthy(self) -> bool:
        assert self._channel is not None
        reply = health_pb2_grpc.HealthStub(self._channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        status = self.stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING and status.version)

    def summary(self) -> Iterator[str]:
        yield f"{self.calls} calls; statuses:"
        for key, count in sorted(self.statuses.items()):
            yield f"  {key}: {count}"

"""One Kubernetes workspace: its Pod and the executor channel into it.

The Pod's PID 1 is the executor's bootstrap (``executor.bundle``). The
daemon that created the Pod ships the bundle into PID 1's stdin through an
``attach`` with stdin only (nothing read back, so nothing of it is in the
container's log); the executor then listens on its root-only unix socket.
Every channel is an ``exec`` of the relay (``relay``) that connects to that
socket, so executor traffic crosses the API server and the kubelet as the
exec stream's stdin and stdout, never PID 1's stdout, which the runtime
writes to the node's log files.

A dropped stream is re-established on the next call by a new exec; the
executor, untouched, keeps its replay records, so a retried call with its
``tool_call_id`` is answered rather than run again. A Pod that is gone
(idle stop, deleted by hand, its node lost) is made again on the next call
with the same claim: the files survive, processes do not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sandboxd.backends.kubernetes import manifests
from sandboxd.backends.kubernetes.api import KubeApi, KubeError
from sandboxd.backends.kubernetes.relay import NO_EXECUTOR, relay_command
from sandboxd.backends.kubernetes.settings import KubernetesSettings
from sandboxd.backends.kubernetes.stream import ExecStream
from sandboxd.backends.shared.channel import ExecutorChannel
from sandboxd.backends.shared.pipes import PipeEndpoints
from sandboxd.backends.shared.session import Activity, ChannelCalls, handshake
from sandboxd.contract.errors import (
    InvalidArgument,
    ResourceExhausted,
    SandboxUnavailable,
    Timeout,
)
from sandboxd.contract.models import SandboxOptions, TerminationReason
from sandboxd.executor.bundle import bundle_payload
from sandboxd.observability import metrics

log = logging.getLogger(__name__)

#: How long an adopted Pod's executor has to answer hello.
ADOPT_HELLO_TIMEOUT_S = 10.0
#: Polling the Pod while it starts or goes.
POLL_S = 0.2
#: Waiting reasons that mean the image cannot be had: the caller's to fix.
IMAGE_PROBLEMS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
)
#: Waiting reasons that mean the container cannot be made as asked.
CONTAINER_PROBLEMS = frozenset(
    {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
)


def pod_state(pod: Mapping[str, Any] | None) -> str:
    if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "stopped"
    return "running" if (pod.get("status") or {}).get("phase") == "Running" else "stopped"


def stop_reason(pod: Mapping[str, Any] | None, parked: bool) -> str:
    """Why a sandbox is not running ("" while it runs, or when unknown)."""
    if pod_state(pod) == "running":
        return ""
    if parked:
        return TerminationReason.IDLE
    if pod is None:
        return ""
    terminated = (_container_status(pod).get("state") or {}).get("terminated") or {}
    if terminated.get("reason") == "OOMKilled":
        return TerminationReason.OUT_OF_MEMORY
    if terminated:
        code = terminated.get("exitCode", 0)
        return (
            TerminationReason.KILLED
            if isinstance(code, int) and code >= 128
            else TerminationReason.EXITED
        )
    return ""


def _container_status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == manifests.CONTAINER:
            return dict(status)
    return {}


def _why_pending(pod: Mapping[str, Any]) -> str:
    """What holds a Pod back, as its status says: phase, conditions not met, waiting reason."""
    status = pod.get("status") or {}
    parts = [f"phase {status.get('phase') or 'unknown'}"]
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            detail = condition.get("reason") or ""
            if condition.get("message"):
                detail += f": {condition['message']}"
            parts.append(f"{condition.get('type')} false" + (f" ({detail})" if detail else ""))
    waiting = (_container_status(pod).get("state") or {}).get("waiting") or {}
    if waiting:
        parts.append(f"container waiting: {waiting.get('reason', '')} {waiting.get('message', '')}")
    return "; ".join(part.strip() for part in parts)


def _started_at(pod: Mapping[str, Any]) -> float | None:
    """Seconds since the workspace container started (None: not running)."""
    running = (_container_status(pod).get("state") or {}).get("running") or {}
    stamp = running.get("startedAt")
    if not stamp:
        return None
    started = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    return max(0.0, time.time() - started.timestamp())


class KubernetesWorkspace(ChannelCalls, PipeEndpoints):
    def __init__(
        self,
        instance_id: str,
        meta: Mapping[str, Any],
        *,
        api: KubeApi,
        settings: KubernetesSettings,
        options: SandboxOptions,
    ) -> None:
        self._instance_id = instance_id
        self._meta = {
            "name": meta["name"],
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
        }
        self.name: str = meta["name"]
        self._api = api
        self._settings = settings
        self._options = options
        self._channel: ExecutorChannel | None = None
        self._stream: ExecStream | None = None
        self._connecting = asyncio.Lock()
        self.activity = Activity(options.idle_ttl_seconds)
        #: The Pod as last read (None: none seen yet, or gone).
        self.pod: dict[str, Any] | None = None

    @property
    def instance_id(self) -> str:
        return self._instance_id

    @property
    def meta(self) -> Mapping[str, Any]:
        """The name, labels and annotations its Pod is made with."""
        return self._meta

    def become(self, instance_id: str, meta: Mapping[str, Any]) -> None:
        """This warm workspace is now the instance ``instance_id`` (its claim,
        ``meta``, says so): a Pod made again later carries the same labels,
        and its idle time counts from now, not from when it was made."""
        self._instance_id = instance_id
        self._options = manifests.options_of(meta)
        self._meta["labels"] = dict(meta.get("labels") or {})
        self._meta["annotations"] = dict(meta.get("annotations") or {})
        self.activity = Activity(self._options.idle_ttl_seconds)

    @property
    def connected(self) -> bool:
        return self._channel is not None and not self._channel.closed

    async def stop_idle(self) -> None:
        """Delete the Pod (the claim stays); the next call makes it again."""
        async with self._connecting:
            if self.activity.in_flight or not self.idle_expired(time.monotonic()):
                return
            # Parked before the delete: a GetSandbox during it must say idle.
            self.activity.parked = True
            try:
                await self._drop_channel()
                await self.delete_pod(wait=False)
            except BaseException:
                self.activity.parked = False  # not stopped: the next sweep tries again
                raise
        log.info(
            "workspace %s: Pod deleted after %d s idle (its claim stays)",
            self._instance_id,
            self._options.idle_ttl_seconds,
        )

    async def restart(self) -> None:
        async with self._connecting:
            await self._drop_channel()
            await self.delete_pod(wait=True)
            self._channel = await self._connect()
            self.activity.parked = False

    async def disconnect(self) -> None:
        async with self._connecting:
            await self._drop_channel()

    async def read_pod(self) -> dict[str, Any] | None:
        try:
            self.pod = await self._api.request("GET", self._api.path("pods", self.name))
        except KubeError as exc:
            if exc.status != 404:
                raise exc.domain(f"reading the Pod of sandbox {self._instance_id!r}") from exc
            self.pod = None
        return self.pod

    async def delete_pod(self, *, wait: bool, timeout: float = 60.0) -> bool:
        """Delete the Pod at once (no grace); ``wait``: until it is gone."""
        pod = await self.read_pod()
        if pod is None:
            return False
        uid = pod["metadata"]["uid"]
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            await self._api.request("DELETE", self._api.path("pods", self.name), body=body)
        except KubeError as exc:
            if exc.status not in (404, 409):
                raise exc.domain(f"deleting the Pod of sandbox {self._instance_id!r}") from exc
        if wait:
            await self._wait_gone(uid, time.monotonic() + timeout)
        return True

    # ------------------------------------------------------------ internals

    async def _drop_channel(self) -> None:
        if self._channel is not None:
            await self._channel.close()
        if self._stream is not None:
            await self._stream.aclose()
        self._channel = self._stream = None

    async def _wait_gone(self, uid: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            pod = await self.read_pod()
            if pod is None or pod["metadata"]["uid"] != uid:
                return
            await asyncio.sleep(POLL_S)
        raise Timeout(f"the Pod of sandbox {self._instance_id!r} is still being deleted")

    async def _connect(self) -> ExecutorChannel:
        deadline = time.monotonic() + self._settings.start_timeout_s
        for attempt in range(2):
            pod, created = await self._running_pod(deadline)
            channel = await self._start_channel(pod, created, deadline)
            if channel is not None:
                return channel
            if attempt == 0:
                # An executor of another bundle (an older daemon's), or one
                # that does not answer: its Pod goes, the claim stays.
                log.info("workspace %s: executor stale or silent; new Pod", self._instance_id)
                await self.delete_pod(wait=True)
        raise SandboxUnavailable(self._not_started())

    async def _start_channel(
        self, pod: Mapping[str, Any], created: bool, deadline: float
    ) -> ExecutorChannel | None:
        attach = await self._ship_bundle() if created else None
        try:
            if created:
                wait = max(deadline - time.monotonic(), 1.0)
            else:
                # A Pod another daemon made moments ago: give its bundle
                # time to arrive before shipping one (two would mix).
                age = _started_at(pod)
                wait = max(self._settings.start_timeout_s - (age or 0.0), 2.0)
                wait = min(wait, max(deadline - time.monotonic(), 1.0))
            channel = await self._open_relay(wait)
            timeout = max(deadline - time.monotonic(), ADOPT_HELLO_TIMEOUT_S)
            hello = await handshake(channel, self._options, self._settings, timeout)
            if hello is not None:
                log.info(
                    "workspace %s: executor channel through exec (%s)",
                    self._instance_id,
                    "started" if attach is not None else "adopted",
                )
                return channel
            stream = self._stream
            # The stream broke and the relay did not exit: the exec never
            # reached the Pod (its node's kubelet down or unreachable). The
            # executor may be fine, so its Pod stays (a new one would lose
            # its processes) and the call fails now, UNAVAILABLE.
            broken = channel.closed and stream is not None and not stream.ran()
            await channel.close()
            if broken and stream is not None:
                why = stream.reason() or "the stream closed"
                raise SandboxUnavailable(
                    f"the executor of sandbox {self._instance_id!r} cannot be reached: the "
                    f"exec through the API server failed ({why}); is its node's kubelet up?"
                )
            if attach is None and stream is not None and stream.exit_code() == NO_EXECUTOR:
                # Running, and no executor: its bundle never came.
                attach = await self._ship_bundle()
                channel = await self._open_relay(max(deadline - time.monotonic(), 1.0))
                hello = await handshake(
                    channel, self._options, self._settings, ADOPT_HELLO_TIMEOUT_S
                )
                if hello is not None:
                    return channel
                await channel.close()
            return None
        finally:
            if attach is not None:
                await attach.aclose()

    async def _ship_bundle(self) -> ExecStream:
        """Write the executor's bundle into PID 1's stdin (attach, stdin only).

        Kept open until the executor answered: closing the attach stream
        does not close the container's stdin (stdinOnce false).
        """
        try:
            attach = await ExecStream.open(
                self._api,
                self.name,
                "attach",
                [
                    ("container", manifests.CONTAINER),
                    ("stdin", "true"),
                    ("stdout", "false"),
                    ("stderr", "false"),
                ],
                name=self._instance_id,
            )
        except KubeError as exc:
            raise exc.domain(f"attaching to the Pod of sandbox {self._instance_id!r}") from exc
        try:
            attach.write(bundle_payload(bytecode=self._settings.ship_bytecode))
            await attach.drain()
        except BaseException:
            await attach.aclose()
            raise
        metrics.container_started()
        return attach

    async def _open_relay(self, wait_s: float) -> ExecutorChannel:
        if self._stream is not None:
            await self._stream.aclose()
        params = [
            ("container", manifests.CONTAINER),
            ("stdin", "true"),
            ("stdout", "true"),
            ("stderr", "true"),
        ]
        params += [
            ("command", part) for part in relay_command(self._settings.executor_python, wait_s)
        ]
        try:
            stream = await ExecStream.open(
                self._api, self.name, "exec", params, name=self._instance_id
            )
        except KubeError as exc:
            raise exc.domain(f"exec into the Pod of sandbox {self._instance_id!r}") from exc
        self._stream = stream
        metrics.executor_channel("exec")
        return ExecutorChannel(
            stream,
            stream,
            name=self._instance_id,
            max_line=self._settings.executor_max_line_bytes,
        )

    def _not_started(self) -> str:
        clue = self._stream.stderr.strip() if self._stream else ""
        return f"the executor of sandbox {self._instance_id!r} did not start" + (
            f": {clue}"
            if clue
            else f"; does the image have {self._settings.executor_python} "
            "(SANDBOXD_EXECUTOR_PYTHON)?"
        )

    async def _create_pod(self) -> dict[str, Any] | None:
        """Make the Pod; None when another daemon made it first."""
        body = manifests.pod(self._meta, self._options, self._settings)
        try:
            self.pod = await self._api.request("POST", self._api.path("pods"), body=body)
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise exc.domain(f"creating the Pod of sandbox {self._instance_id!r}") from exc
        return self.pod

    async def _running_pod(self, deadline: float) -> tuple[dict[str, Any], bool]:
        """The Pod, running; made (again) if missing or ended. (pod, made here)."""
        created = False
        while True:
            pod = await self.read_pod()
            if pod is not None and pod["metadata"].get("deletionTimestamp"):
                await self._wait_gone(pod["metadata"]["uid"], deadline)
                continue
            phase = (pod or {}).get("status", {}).get("phase")
            if pod is not None and phase in ("Succeeded", "Failed"):
                # Its executor ended (restartPolicy Never): a fresh Pod.
                await self.delete_pod(wait=True)
                continue
            if pod is None:
                made = await self._create_pod()
                if made is None:
                    continue  # another daemon's: wait for it like ours
                created = True
            break
        return await self._wait_running(deadline), created

    async def _wait_running(self, deadline: float) -> dict[str, Any]:
        while True:
            pod = await self.read_pod()
            if pod is None:
                raise SandboxUnavailable(
                    f"the Pod of sandbox {self._instance_id!r} was deleted while it started"
                )
            status = pod.get("status") or {}
            phase = status.get("phase")
            container = _container_status(pod)
            state = container.get("state") or {}
            if phase == "Running" and "running" in state:
                return pod
            if phase in ("Succeeded", "Failed"):
                raise SandboxUnavailable(
                    f"the Pod of sandbox {self._instance_id!r} ended as it started: "
                    f"{status.get('reason') or phase} {status.get('message') or ''}".rstrip()
                )
            self._raise_if_hopeless(pod, state.get("waiting") or {})
            if time.monotonic() > deadline:
                raise Timeout(
                    f"the Pod of sandbox {self._instance_id!r} did not start in "
                    f"{self._settings.start_timeout_s:.0f} s ({_why_pending(pod)})"
                )
            await asyncio.sleep(POLL_S)

    def _raise_if_hopeless(self, pod: Mapping[str, Any], waiting: Mapping[str, Any]) -> None:
        reason = str(waiting.get("reason") or "")
        message = str(waiting.get("message") or "")
        if reason in IMAGE_PROBLEMS:
            raise InvalidArgument(
                f"image {self._options.image!r} cannot be had on the cluster "
                f"({reason}: {message}); sandboxd never builds or pulls it for you"
            )
        if reason in CONTAINER_PROBLEMS:
            raise SandboxUnavailable(f"the workspace container cannot start ({reason}: {message})")
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
                # A claim still being provisioned and bound, or not yet in the
                # scheduler's cache ('persistentvolumeclaim "…" not found', seen
                # in CI right after the claim was made), is not a verdict.
                and "persistentvolumeclaim" not in str(condition.get("message", "")).lower()
            ):
                raise ResourceExhausted(
                    f"no node can run sandbox {self._instance_id!r} as asked: "
                    f"{condition.get('message', '')}"
                )

"""The Kubernetes backend: one PersistentVolumeClaim and one Pod per instance.

The cluster is the source of truth and sandboxd replicas hold no placement
state: an instance is its claim (names derived from the id, so a create
race has one winner and every replica finds the same objects; labels find
them all), and its Pod comes and goes with use (idle stop deletes it, the
next call makes it again on the same claim). The scheduler places Pods;
every byte to an executor crosses the API server (``workspace``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sandboxd.backends.kubernetes import manifests
from sandboxd.backends.kubernetes.api import KubeApi, KubeError, load_access
from sandboxd.backends.kubernetes.settings import KubernetesSettings
from sandboxd.backends.kubernetes.workspace import KubernetesWorkspace, pod_state, stop_reason
from sandboxd.backends.shared import snapshots as shared_snapshots
from sandboxd.backends.shared.errors import unknown_instance
from sandboxd.backends.shared.options import check_same, effective, overridden
from sandboxd.backends.shared.session import stop_idle_workspaces
from sandboxd.backends.shared.settings import DEFAULT_DISK_BYTES
from sandboxd.contract.errors import AlreadyExists, InvalidArgument, SandboxUnavailable, Timeout
from sandboxd.contract.models import (
    DiskLimit,
    ForkResult,
    PoolStatus,
    Runtime,
    RuntimeInfo,
    SandboxInfo,
    SandboxOptions,
    SnapshotInfo,
)

log = logging.getLogger(__name__)

#: ``ForkResult.method`` of this backend (models.FORK_METHODS).
CLONE_METHOD = "volume-clone"
#: What a fresh ext4 claim holds and a fresh workspace must not.
LOST_FOUND = "lost+found"
#: The annotation that marks the cluster's default StorageClass.
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
#: Tries of a call the daemon makes itself while another replica may take over.
TAKEOVER_ATTEMPTS = 3
#: How long delete waits for the Pod and the claim to be gone.
DELETE_WAIT_S = 60.0


class KubernetesBackend:
    name = "kubernetes"

    def __init__(self, settings: KubernetesSettings) -> None:
        self.settings = settings
        self._api: KubeApi | None = None
        self._workspaces: dict[str, KubernetesWorkspace] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._immediate: bool | None = None

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            raise SandboxUnavailable("the Kubernetes backend has not started")
        return self._api

    @property
    def claim_bytes(self) -> int:
        # A claim needs a size: disk_bytes=0 ("no limit") gets the default.
        return self.settings.disk_bytes or DEFAULT_DISK_BYTES

    async def start(self) -> None:
        self._api = KubeApi(load_access(self.settings.kubeconfig), self.settings.kube_namespace)
        await self._ensure_network_policy()
        adopted = await self._adopt()
        log.info(
            "kubernetes backend ready: namespace %s at %s, adopted %d workspace(s)",
            self.api.namespace,
            self.api.access.server,
            adopted,
        )
        self._reaper = asyncio.create_task(self._stop_idle_workspaces(), name="idle-reaper")

    async def _ensure_network_policy(self) -> None:
        """Sandbox Pods get no network unless asked (Docker's network_mode=none)."""
        body = manifests.deny_all_policy(self.settings.namespace)
        path = f"/apis/networking.k8s.io/v1/namespaces/{self.api.namespace}/networkpolicies"
        try:
            await self.api.request("POST", path, body=body)
        except KubeError as exc:
            if exc.status != 409:
                raise exc.domain("creating the sandboxes' deny-all NetworkPolicy") from exc

    async def _adopt(self) -> int:
        """Know every workspace already there; channels connect on first use."""
        for claim in await self._claims():
            instance_id = manifests.instance_of(claim["metadata"])
            if instance_id is not None:
                self._workspace_for(instance_id, claim)
        return len(self._workspaces)

    async def _stop_idle_workspaces(self) -> None:
        await stop_idle_workspaces(self._workspaces.values, self.settings.idle_check_interval_s)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for workspace in list(self._workspaces.values()):
            await workspace.disconnect()
        self._workspaces.clear()
        if self._api is not None:
            await self._api.close()
            self._api = None

    # ------------------------------------------------------------ lookups

    def _lock(self, instance_id: str) -> asyncio.Lock:
        return self._locks.setdefault(instance_id, asyncio.Lock())

    def _name(self, instance_id: str) -> str:
        return manifests.object_name(self.settings.namespace, instance_id)

    async def _claims(self) -> list[dict[str, Any]]:
        try:
            found = await self.api.request(
                "GET",
                self.api.path("persistentvolumeclaims"),
                params={"labelSelector": manifests.selector(self.settings.namespace)},
            )
        except KubeError as exc:
            raise exc.domain("listing the sandboxes' claims") from exc
        return [
            claim
            for claim in found.get("items") or []
            if not claim["metadata"].get("deletionTimestamp")
        ]

    async def _find_claim(self, instance_id: str) -> dict[str, Any] | None:
        try:
            claim = await self.api.request(
                "GET", self.api.path("persistentvolumeclaims", self._name(instance_id))
            )
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise exc.domain(f"reading the claim of sandbox {instance_id!r}") from exc
        meta = claim.get("metadata") or {}
        if meta.get("deletionTimestamp") or manifests.instance_of(meta) != instance_id:
            return None
        return claim

    def _workspace_for(self, instance_id: str, claim: Mapping[str, Any]) -> KubernetesWorkspace:
        workspace = self._workspaces.get(instance_id)
        if workspace is None:
            meta = claim["metadata"]
            workspace = KubernetesWorkspace(
                instance_id,
                meta,
                api=self.api,
                settings=self.settings,
                options=manifests.options_of(meta),
            )
            self._workspaces[instance_id] = workspace
        return workspace

    def _info(
        self, instance_id: str, claim: Mapping[str, Any], pod: Mapping[str, Any] | None
    ) -> SandboxInfo:
        meta = claim["metadata"]
        annotations = meta.get("annotations") or {}
        workspace = self._workspaces.get(instance_id)
        parked = workspace is not None and workspace.activity.parked
        return SandboxInfo(
            instance_id=instance_id,
            state=pod_state(pod),
            container_id=str(((pod or {}).get("metadata") or {}).get("uid", "")),
            volume=str(meta["name"]),
            options=manifests.options_of(meta),
            created_at_ms=int(annotations.get("sandboxd.created_at_ms", "0") or 0),
            termination_reason=stop_reason(pod, parked),
        )

    # ------------------------------------------------------------ lifecycle

    async def create(
        self, instance_id: str, requested: SandboxOptions, wanted: SandboxOptions
    ) -> tuple[SandboxInfo, bool]:
        async with self._lock(instance_id):
            existing = await self._find_claim(instance_id)
            if existing is not None:
                return await self._adopt_existing(instance_id, requested, existing), False
            await self._check_creatable(wanted)
            meta = manifests.metadata(
                self.settings.namespace, instance_id, wanted, int(time.time() * 1000)
            )
            # The sandbox's own disk_bytes (SandboxOptions, #28) sizes its claim.
            size = wanted.disk_bytes or self.claim_bytes
            body = manifests.claim(meta, size, self.settings.kube_storage_class)
            try:
                claim = await self.api.request(
                    "POST", self.api.path("persistentvolumeclaims"), body=body
                )
            except KubeError as exc:
                if exc.status != 409:
                    raise exc.domain(f"creating the claim of sandbox {instance_id!r}") from exc
                # Another replica won the race: the same sandbox, adopted.
                raced = await self._find_claim(instance_id)
                if raced is None:
                    raise SandboxUnavailable(
                        f"sandbox {instance_id!r} is being deleted; create it again"
                    ) from exc
                return await self._adopt_existing(instance_id, requested, raced), False
            await self._wait_bound(claim)
            return await self._start_new(instance_id, claim), True

    async def _adopt_existing(
        self, instance_id: str, requested: SandboxOptions, claim: Mapping[str, Any]
    ) -> SandboxInfo:
        check_same(instance_id, requested, manifests.options_of(claim["metadata"]))
        workspace = self._workspace_for(instance_id, claim)
        await workspace.ensure_running()
        return self._info(instance_id, claim, workspace.pod)

    async def _start_new(
        self, instance_id: str, claim: Mapping[str, Any], *, fresh: bool = True
    ) -> SandboxInfo:
        workspace = self._workspace_for(instance_id, claim)
        try:
            await workspace.ensure_running()
            if fresh:
                # A workspace starts empty: an ext4 claim comes with an empty
                # lost+found for tools and models to trip on (the Docker
                # backend removes it from its disk images the same way).
                await _taking_over(
                    lambda: workspace.call(
                        "remove",
                        {"path": f"{manifests.WORKSPACE_MOUNT}/{LOST_FOUND}", "missing_ok": True},
                    )
                )
        except BaseException:
            # Nothing of a create that failed stays: no Pod, no claim.
            self._workspaces.pop(instance_id, None)
            with contextlib.suppress(Exception):
                await asyncio.shield(self._remove(instance_id, workspace, wait=False))
            raise
        return self._info(instance_id, claim, workspace.pod)

    async def _binds_at_once(self) -> bool:
        """Whether the claims' StorageClass binds at once (``Immediate``); read once.

        Then a Pod is made only once its claim is Bound: made earlier it is
        unschedulable until then, and the scheduler's back-off (seconds)
        would come on top. Unknown (no permission to read classes): False.
        """
        if self._immediate is None:
            try:
                classes = await self.api.request("GET", "/apis/storage.k8s.io/v1/storageclasses")
            except (KubeError, SandboxUnavailable):
                classes = {}
            wanted = self.settings.kube_storage_class
            mode = ""
            for item in classes.get("items") or []:
                annotations = item["metadata"].get("annotations") or {}
                default = annotations.get(DEFAULT_CLASS) == "true"
                if item["metadata"]["name"] == wanted or (not wanted and default):
                    mode = str(item.get("volumeBindingMode", "Immediate"))
            self._immediate = mode == "Immediate"
        return self._immediate

    async def _wait_bound(self, claim: Mapping[str, Any]) -> None:
        if not await self._binds_at_once():
            return
        path = self.api.path("persistentvolumeclaims", claim["metadata"]["name"])
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            try:
                current = await self.api.request("GET", path)
            except KubeError as exc:
                raise exc.domain("reading a new claim") from exc
            if (current.get("status") or {}).get("phase") == "Bound":
                return
            await asyncio.sleep(0.1)
        # Not bound in time: the Pod's start says why (its own deadline).

    async def _check_creatable(self, options: SandboxOptions) -> None:
        if options.runtime != Runtime.RUNSC:
            return
        runtime_class = self.settings.kube_gvisor_runtime_class
        try:
            await self.api.request("GET", f"/apis/node.k8s.io/v1/runtimeclasses/{runtime_class}")
        except KubeError as exc:
            if exc.status == 404:
                raise InvalidArgument(
                    f"runtime runsc (gVisor) needs the RuntimeClass {runtime_class!r}, which "
                    "this cluster does not have (SANDBOXD_KUBE_GVISOR_RUNTIME_CLASS names it)"
                ) from exc
            if exc.status != 403:  # not allowed to look: the Pod's admission will say
                raise exc.domain("reading the gVisor RuntimeClass") from exc

    async def runtimes(self) -> list[RuntimeInfo]:
        runtime_class = self.settings.kube_gvisor_runtime_class
        try:
            await self.api.request("GET", f"/apis/node.k8s.io/v1/runtimeclasses/{runtime_class}")
            gvisor = True
        except (KubeError, SandboxUnavailable):
            gvisor = False
        return [
            RuntimeInfo(name=Runtime.RUNC.value, platform="kubernetes", available=True),
            RuntimeInfo(
                name=Runtime.RUNSC.value,
                platform=f"kubernetes RuntimeClass {runtime_class}",
                available=gvisor,
            ),
        ]

    def disk_limit(self) -> DiskLimit:
        # The claim's size, as the storage class enforces it.
        return DiskLimit(enforced=True, bytes=self.claim_bytes)

    def pool_status(self) -> PoolStatus:
        return PoolStatus()

    async def get(self, instance_id: str) -> SandboxInfo:
        claim = await self._find_claim(instance_id)
        if claim is None:
            raise unknown_instance(instance_id)
        workspace = self._workspace_for(instance_id, claim)
        return self._info(instance_id, claim, await workspace.read_pod())

    async def read_marks(self, instance_id: str | None = None) -> dict[str, dict[str, str]]:
        """The service's notes: annotations of the claim (they change in place)."""
        if instance_id is not None:
            claim = await self._find_claim(instance_id)
            claims = [claim] if claim is not None else []
        else:
            claims = await self._claims()
        found: dict[str, dict[str, str]] = {}
        for claim in claims:
            meta = claim["metadata"]
            owner = manifests.instance_of(meta)
            notes = manifests.marks_of(meta)
            if owner is not None and notes:
                found[owner] = notes
        return found

    async def write_marks(self, instance_id: str, values: Mapping[str, str]) -> None:
        claim = await self._find_claim(instance_id)
        if claim is None:
            return  # no sandbox, nothing to note: its notes went with its claim
        patch = manifests.marks_patch(claim["metadata"], values)
        try:
            await self.api.request(
                "PATCH",
                self.api.path("persistentvolumeclaims", claim["metadata"]["name"]),
                body=patch,
                content_type="application/merge-patch+json",
            )
        except KubeError as exc:
            if exc.status != 404:
                raise exc.domain(f"writing the notes of sandbox {instance_id!r}") from exc

    async def list(self, label_selector: Mapping[str, str]) -> list[SandboxInfo]:
        claims = await self._claims()
        try:
            pods = await self.api.request(
                "GET",
                self.api.path("pods"),
                params={"labelSelector": manifests.selector(self.settings.namespace)},
            )
        except KubeError as exc:
            raise exc.domain("listing the sandboxes' Pods") from exc
        by_name = {pod["metadata"]["name"]: pod for pod in pods.get("items") or []}
        infos = []
        for claim in claims:
            meta = claim["metadata"]
            instance_id = manifests.instance_of(meta)
            if instance_id is None:
                continue
            # The caller's labels are annotations (any text): matched here.
            mine = manifests.user_labels_of(meta)
            if any(mine.get(key) != value for key, value in label_selector.items()):
                continue
            infos.append(self._info(instance_id, claim, by_name.get(meta["name"])))
        return sorted(infos, key=lambda info: info.instance_id)

    async def delete(self, instance_id: str) -> None:
        async with self._lock(instance_id):
            workspace = self._workspaces.pop(instance_id, None)
            claim = await self._find_claim(instance_id)
            if workspace is None and claim is not None:
                workspace = self._workspace_for(instance_id, claim)
                self._workspaces.pop(instance_id, None)
            if workspace is None:
                raise unknown_instance(instance_id)
            if not await self._remove(instance_id, workspace, wait=True):
                raise unknown_instance(instance_id)

    async def _remove(
        self, instance_id: str, workspace: KubernetesWorkspace, *, wait: bool
    ) -> bool:
        """Delete the Pod and the claim; ``wait``: until both are gone."""
        await workspace.disconnect()
        removed = await workspace.delete_pod(wait=False)
        path = self.api.path("persistentvolumeclaims", workspace.name)
        try:
            await self.api.request("DELETE", path)
            removed = True
        except KubeError as exc:
            if exc.status != 404:
                raise exc.domain(f"deleting the claim of sandbox {instance_id!r}") from exc
        if wait:
            deadline = time.monotonic() + DELETE_WAIT_S
            while await self._exists(path) or await workspace.read_pod() is not None:
                if time.monotonic() > deadline:
                    raise Timeout(f"sandbox {instance_id!r} is still being deleted")
                await asyncio.sleep(0.2)
        return removed

    async def _exists(self, path: str) -> bool:
        try:
            await self.api.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise exc.domain("reading a claim") from exc
        return True

    async def restart(self, instance_id: str) -> SandboxInfo:
        workspace = await self.workspace(instance_id)
        await workspace.restart()
        claim = await self._find_claim(instance_id)
        if claim is None:
            raise unknown_instance(instance_id)
        return self._info(instance_id, claim, workspace.pod)

    async def fork(self, source_id: str, new_id: str, override: SandboxOptions) -> ForkResult:
        """A new claim cloned from the source's by the storage class (PVC
        ``dataSource``): the copy is the volume's, taken by the provisioner."""
        started = time.monotonic()
        first, second = sorted((source_id, new_id))
        async with self._lock(first), self._lock(second):
            source = await self._find_claim(source_id)
            if source is None:
                raise unknown_instance(source_id)
            if await self._find_claim(new_id) is not None:
                raise AlreadyExists(f"sandbox {new_id!r} already exists; fork onto a new id")
            wanted = effective(
                overridden(manifests.options_of(source["metadata"]), override), self.settings
            )
            await self._check_creatable(wanted)
            meta = manifests.metadata(
                self.settings.namespace, new_id, wanted, int(time.time() * 1000)
            )
            size = _storage_bytes(source) or self.claim_bytes
            body = manifests.claim(
                meta,
                max(size, self.claim_bytes),
                self.settings.kube_storage_class,
                source=source["metadata"]["name"],
            )
            try:
                claim = await self.api.request(
                    "POST", self.api.path("persistentvolumeclaims"), body=body
                )
            except KubeError as exc:
                raise exc.domain(f"creating the claim of fork {new_id!r}") from exc
            await self._wait_bound(claim)
            info = await self._start_new(new_id, claim, fresh=False)
            return ForkResult(
                sandbox=info,
                method=CLONE_METHOD,
                duration_ms=int((time.monotonic() - started) * 1000),
            )

    # Named snapshots: not on this engine yet (a claim cloned per snapshot
    # would do; README's backend table says so). Each says why, clearly.

    async def snapshot(self, instance_id: str, name: str, tenant: str) -> SnapshotInfo:
        raise shared_snapshots.unsupported(self.name)

    async def snapshots(self, tenant: str) -> Sequence[SnapshotInfo]:
        raise shared_snapshots.unsupported(self.name)

    async def delete_snapshot(self, name: str, tenant: str) -> None:
        raise shared_snapshots.unsupported(self.name)

    async def restore(self, instance_id: str, name: str, tenant: str) -> ForkResult:
        raise shared_snapshots.unsupported(self.name)

    async def workspace(self, instance_id: str) -> KubernetesWorkspace:
        workspace = self._workspaces.get(instance_id)
        if workspace is None:
            async with self._lock(instance_id):
                workspace = self._workspaces.get(instance_id)
                if workspace is None:
                    claim = await self._find_claim(instance_id)
                    if claim is None:
                        raise unknown_instance(instance_id)
                    workspace = self._workspace_for(instance_id, claim)
        return workspace


async def _taking_over(call: Callable[[], Awaitable[Any]]) -> Any:
    """``call``, again if another replica took the executor over meanwhile (a
    racing creator's hello retires this one's channel; the next call
    reconnects)."""
    for attempt in range(TAKEOVER_ATTEMPTS):
        try:
            return await call()
        except SandboxUnavailable:
            if attempt == TAKEOVER_ATTEMPTS - 1:
                raise
    return None


_UNITS = {
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "k": 1000,
    "M": 10**6,
    "G": 10**9,
}


def _storage_bytes(claim: Mapping[str, Any]) -> int:
    """The claim's requested size in bytes (0 if unreadable)."""
    text = str(
        ((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", "")
    )
    for suffix, factor in _UNITS.items():
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    return int(text) if text.isdigit() else 0

"""The Kubernetes backend: one PersistentVolumeClaim and one Pod per instance.

The cluster is the source of truth and sandboxd replicas hold no placement
state: an instance is its claim (names derived from the id, so a create
race has one winner and every replica finds the same objects; labels find
them all), and its Pod comes and goes with use (idle stop deletes it, the
next call makes it again on the same claim). The scheduler places Pods;
every byte to an executor crosses the API server (``workspace``).

The warm pool (``SANDBOXD_KUBE_POOL_SIZE``) keeps claims and Pods made
ahead, executors answering. Object names cannot change, so a warm claim
keeps its own name and becomes an instance by a compare-and-swap patch of
its labels (``manifests.claim_patch``); instances are found by name and,
failing that, by their instance label. The race between replicas creating
one id is decided by a Lease with the instance's name (``_reserve``),
taken before either path, cold or warm.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sandboxd.backends.kubernetes import manifests
from sandboxd.backends.kubernetes.api import KubeApi, KubeError, load_access
from sandboxd.backends.kubernetes.settings import KubernetesSettings
from sandboxd.backends.kubernetes.workspace import KubernetesWorkspace, pod_state, stop_reason
from sandboxd.backends.shared import snapshots as shared_snapshots
from sandboxd.backends.shared.errors import unknown_instance, unsupported
from sandboxd.backends.shared.options import check_same, effective, overridden
from sandboxd.backends.shared.pool import WarmPool
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
    TemplateInfo,
)

log = logging.getLogger(__name__)

#: ``ForkResult.method`` of this backend (models.FORK_METHODS).
CLONE_METHOD = "volume-clone"
#: What a fresh ext4 claim holds and a fresh workspace must not.
LOST_FOUND = "lost+found"
#: The annotation that marks the cluster's default StorageClass.
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
#: Tries of a call the daemon makes itself on a Pod just made (its stream may drop).
TAKEOVER_ATTEMPTS = 3
#: How long delete waits for the Pod and the claim to be gone.
DELETE_WAIT_S = 60.0
#: Polling for the claim of a sandbox another replica is making.
RESERVE_POLL_S = 0.1
#: JSON patch (RFC 6902): the warm claim's compare-and-swap.
JSON_PATCH = "application/json-patch+json"


class KubernetesBackend:
    name = "kubernetes"

    def __init__(self, settings: KubernetesSettings) -> None:
        self.settings = settings
        self._api: KubeApi | None = None
        self._workspaces: dict[str, KubernetesWorkspace] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._immediate: bool | None = None
        #: Whether Leases can be had (RBAC); without them, no warm pool.
        self._leases = True
        self._background: set[asyncio.Task[None]] = set()
        #: This daemon's mark on its warm Pods: the host name, stable across
        #: a restart of the daemon (or of its container in a replica's Pod),
        #: so a restart removes what its predecessor left warm.
        self.owner = manifests.pool_owner(socket.gethostname())
        self.pool_options = effective(SandboxOptions(), settings)
        self.pool: WarmPool[KubernetesWorkspace] = WarmPool(
            settings.kube_pool_size,
            make=self._make_pooled,
            discard=self._discard_pooled,
            usable=lambda workspace: workspace.connected,
            ceiling=settings.kube_pool_max,
        )

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
        await self._remove_stale_pool()
        adopted = await self._adopt()
        log.info(
            "kubernetes backend ready: namespace %s at %s, adopted %d workspace(s)",
            self.api.namespace,
            self.api.access.server,
            adopted,
        )
        self.pool.start()
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
        await self.pool.close()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
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

    async def _claims(self, instance_id: str | None = None) -> list[dict[str, Any]]:
        try:
            found = await self.api.request(
                "GET",
                self.api.path("persistentvolumeclaims"),
                params={"labelSelector": manifests.selector(self.settings.namespace, instance_id)},
            )
        except KubeError as exc:
            raise exc.domain("listing the sandboxes' claims") from exc
        return [
            claim
            for claim in found.get("items") or []
            if not claim["metadata"].get("deletionTimestamp")
        ]

    async def _find_claim(self, instance_id: str) -> dict[str, Any] | None:
        known = self._workspaces.get(instance_id)
        name = known.name if known is not None else self._name(instance_id)
        try:
            claim = await self.api.request("GET", self.api.path("persistentvolumeclaims", name))
        except KubeError as exc:
            if exc.status != 404:
                raise exc.domain(f"reading the claim of sandbox {instance_id!r}") from exc
            # Not made cold: a warm claim it took keeps that claim's name.
            claims = await self._claims(instance_id)
        else:
            claims = [claim]
        for found in claims:
            meta = found.get("metadata") or {}
            if not meta.get("deletionTimestamp") and manifests.instance_of(meta) == instance_id:
                return found
        return None

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
            made = await self._reserve(instance_id)
            if made is not None:  # another replica made it meanwhile
                return await self._adopt_existing(instance_id, requested, made), False
            try:
                # The caller's labels (a tenant's among them) are annotations,
                # written at the claim: only the rest must be the pool's.
                if dataclasses.replace(wanted, labels={}) == self.pool_options and self._leases:
                    claimed = await self._claim_pooled(instance_id, wanted)
                    if claimed is not None:
                        return claimed, True
                return await self._create_cold(instance_id, requested, wanted)
            except BaseException:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._drop_lease(instance_id))
                raise

    async def _create_cold(
        self, instance_id: str, requested: SandboxOptions, wanted: SandboxOptions
    ) -> tuple[SandboxInfo, bool]:
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
            # Another replica won the race (one without Leases): the same
            # sandbox, adopted.
            raced = await self._find_claim(instance_id)
            if raced is None:
                raise SandboxUnavailable(
                    f"sandbox {instance_id!r} is being deleted; create it again"
                ) from exc
            return await self._adopt_existing(instance_id, requested, raced), False
        await self._wait_bound(claim)
        return await self._start_new(instance_id, claim), True

    # ------------------------------------------------------------ one creator per id

    def _lease_path(self, instance_id: str = "") -> str:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.api.namespace}/leases"
        return f"{path}/{self._name(instance_id)}" if instance_id else path

    async def _reserve(self, instance_id: str) -> dict[str, Any] | None:
        """Take the instance's Lease: None once taken here, else the claim of
        the replica that took it (waited for while it makes it).

        A Lease left by a replica that died while creating (no claim, older
        than two start timeouts) is removed and taken again.
        """
        deadline = time.monotonic() + self.settings.start_timeout_s
        body = manifests.lease(self.settings.namespace, instance_id, self.owner)
        while self._leases:
            try:
                await self.api.request("POST", self._lease_path(), body=body)
                return None
            except KubeError as exc:
                if exc.status in (403, 404):
                    # Not allowed (an older Role) or no such API: the claim's
                    # name decides races, as before Leases; warm claims have
                    # names of their own, so the pool is off.
                    log.warning("kubernetes backend: cannot create Leases (%s); warm pool off", exc)
                    self._leases = False
                    return None
                if exc.status != 409:
                    raise exc.domain(f"reserving sandbox {instance_id!r}") from exc
            claim = await self._find_claim(instance_id)
            if claim is not None:
                return claim
            try:
                lease = await self.api.request("GET", self._lease_path(instance_id))
            except KubeError as exc:
                if exc.status == 404:
                    continue  # let go meanwhile: take it
                raise exc.domain(f"reading the Lease of sandbox {instance_id!r}") from exc
            if _age_s(lease) > 2 * self.settings.start_timeout_s:
                await self._drop_lease(instance_id, uid=lease["metadata"]["uid"])
                continue
            if time.monotonic() > deadline:
                raise SandboxUnavailable(
                    f"sandbox {instance_id!r} is being created by another sandboxd replica; "
                    "create it again"
                )
            await asyncio.sleep(RESERVE_POLL_S)
        return None

    async def _drop_lease(self, instance_id: str, uid: str = "") -> None:
        if not self._leases:
            return
        body = {"preconditions": {"uid": uid}} if uid else None
        try:
            await self.api.request("DELETE", self._lease_path(instance_id), body=body)
        except KubeError as exc:
            if exc.status not in (403, 404, 409):
                raise exc.domain(f"deleting the Lease of sandbox {instance_id!r}") from exc

    # ------------------------------------------------------------ warm pool

    async def _claim_pooled(self, instance_id: str, wanted: SandboxOptions) -> SandboxInfo | None:
        workspace = self.pool.take()
        if workspace is None:
            return None
        patch = manifests.claim_patch(
            self.owner, workspace.meta, instance_id, wanted, int(time.time() * 1000)
        )
        try:
            claim = await self.api.request(
                "PATCH",
                self.api.path("persistentvolumeclaims", workspace.name),
                body=patch,
                content_type=JSON_PATCH,
            )
        except (KubeError, SandboxUnavailable) as exc:
            # Gone or no longer warm (a restart of this daemon's host let it
            # go): cold instead.
            log.info("warm pool: claim for %s failed (%s)", instance_id, exc)
            await self._discard_pooled(workspace)
            return None
        # The Pod's labels follow (for `kubectl -l`), not waited for: the
        # claim is what counts, and a Pod made again takes the claim's.
        relabel = asyncio.create_task(self._relabel_pod(workspace.name, instance_id, patch))
        self._background.add(relabel)
        relabel.add_done_callback(self._background.discard)
        workspace.become(instance_id, claim["metadata"])
        self._workspaces[instance_id] = workspace
        return self._info(instance_id, claim, workspace.pod)

    async def _relabel_pod(self, name: str, instance_id: str, patch: list[dict[str, Any]]) -> None:
        try:
            await self.api.request(
                "PATCH", self.api.path("pods", name), body=patch, content_type=JSON_PATCH
            )
        except (KubeError, SandboxUnavailable) as exc:
            log.warning("warm pool: could not relabel the Pod of %s: %s", instance_id, exc)

    async def _make_pooled(self) -> KubernetesWorkspace:
        options = self.pool_options
        await self._check_creatable(options)
        meta = manifests.pool_metadata(
            self.settings.namespace, self.owner, options, int(time.time() * 1000)
        )
        body = manifests.claim(
            meta, options.disk_bytes or self.claim_bytes, self.settings.kube_storage_class
        )
        try:
            claim = await self.api.request(
                "POST", self.api.path("persistentvolumeclaims"), body=body
            )
        except KubeError as exc:
            raise exc.domain("creating a warm claim") from exc
        workspace = KubernetesWorkspace(
            meta["name"], claim["metadata"], api=self.api, settings=self.settings, options=options
        )
        try:
            await self._wait_bound(claim)
            await workspace.ensure_running()
            await _empty(workspace)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._discard_pooled(workspace))
            raise
        return workspace

    async def _discard_pooled(self, workspace: KubernetesWorkspace) -> None:
        try:
            await workspace.disconnect()
            await workspace.delete_pod(wait=False)
            await self.api.request(
                "DELETE", self.api.path("persistentvolumeclaims", workspace.name)
            )
        except KubeError as exc:
            if exc.status != 404:
                log.warning("warm pool: could not remove %s: %s", workspace.name, exc)
        except SandboxUnavailable as exc:
            log.warning("warm pool: could not remove %s: %s", workspace.name, exc)

    async def _remove_stale_pool(self) -> None:
        """Warm claims and Pods this host's previous daemon left: no one's data."""
        query = {"labelSelector": manifests.pool_selector(self.settings.namespace, self.owner)}
        try:
            claims = await self.api.request(
                "GET", self.api.path("persistentvolumeclaims"), params=query
            )
            pods = await self.api.request("GET", self.api.path("pods"), params=query)
        except KubeError as exc:
            raise exc.domain("listing warm Pods left by a previous run") from exc
        names = {item["metadata"]["name"] for item in claims.get("items") or []}
        for pod in pods.get("items") or []:
            # A Pod still labelled warm whose claim was taken (its relabelling
            # failed) is an instance's: kept.
            name = pod["metadata"]["name"]
            if not await self._exists(self.api.path("persistentvolumeclaims", name)):
                names.add(name)
        for name in sorted(names):
            for kind, body in (
                ("pods", {"gracePeriodSeconds": 0}),
                ("persistentvolumeclaims", None),
            ):
                try:
                    await self.api.request("DELETE", self.api.path(kind, name), body=body)
                except KubeError as exc:
                    if exc.status != 404:
                        raise exc.domain(f"removing the warm {kind} {name}") from exc
        if names:
            log.info("warm pool: removed %d warm workspace(s) of a previous run", len(names))

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
                await _empty(workspace)
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
        return self.pool.status()

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
        # Last: while it stands, no other replica makes this id again.
        await self._drop_lease(instance_id)
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
            if await self._reserve(new_id) is not None:
                raise AlreadyExists(f"sandbox {new_id!r} already exists; fork onto a new id")
            try:
                return await self._fork_onto(source, new_id, wanted, started)
            except BaseException:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._drop_lease(new_id))
                raise

    async def _fork_onto(
        self, source: Mapping[str, Any], new_id: str, wanted: SandboxOptions, started: float
    ) -> ForkResult:
        meta = manifests.metadata(self.settings.namespace, new_id, wanted, int(time.time() * 1000))
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
        # None kept here: ListSnapshots is empty and the disk quota counts none
        # (a refusal here would refuse every tenant's create and GetStatus).
        return []

    async def delete_snapshot(self, name: str, tenant: str) -> None:
        raise shared_snapshots.unsupported(self.name)

    async def restore(self, instance_id: str, name: str, tenant: str) -> ForkResult:
        raise shared_snapshots.unsupported(self.name)

    async def build_template(
        self, context: Path, dockerfile: str
    ) -> AsyncIterator[str | TemplateInfo]:
        raise unsupported("templates", self.name, "build the image with the engine's own tools")
        yield ""  # an async generator, as the port's

    async def template_from_snapshot(
        self, name: str, tenant: str
    ) -> AsyncIterator[str | TemplateInfo]:
        raise unsupported("templates", self.name, "build the image with the engine's own tools")
        yield ""  # an async generator, as the port's

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


async def _empty(workspace: KubernetesWorkspace) -> None:
    """A workspace starts empty: an ext4 claim comes with an empty lost+found
    for tools and models to trip on (the Docker backend removes it from its
    disk images the same way)."""
    await _taking_over(
        lambda: workspace.call(
            "remove", {"path": f"{manifests.WORKSPACE_MOUNT}/{LOST_FOUND}", "missing_ok": True}
        )
    )


def _age_s(lease: Mapping[str, Any]) -> float:
    """Seconds since the Lease was taken (0 when it does not say)."""
    stamp = str((lease.get("spec") or {}).get("acquireTime") or "")
    if not stamp:
        return 0.0
    taken = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return max(0.0, time.time() - taken.timestamp())


async def _taking_over(call: Callable[[], Awaitable[Any]]) -> Any:
    """``call``, again if its channel dropped meanwhile (the exec stream of a
    Pod just made; the next call reconnects, and the executor answers every
    replica at once, executor.owners)."""
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

"""The objects sandboxd makes on Kubernetes: a claim and a Pod per instance.

Names are derived from the namespace and the instance id alone, so every
replica computes the same ones and the API server's name uniqueness decides
a race (one Pod, one claim). Instance ids allow capitals and ``_``, which
object names do not: the name keeps a readable, lowered form and a hash of
the exact id, so ``A`` and ``a`` never share a Pod.

Labels select (managed, namespace, instance hash, network); annotations
carry what labels cannot hold (the id itself, the options as JSON, the
caller's labels): the shared ``labels`` vocabulary, split in two.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sandboxd.backends.kubernetes.settings import KubernetesSettings
from sandboxd.backends.shared import labels
from sandboxd.contract.models import Runtime, SandboxOptions
from sandboxd.executor.bundle import bootstrap_command
from sandboxd.executor.environment import container_env
from sandboxd.executor.identity import SANDBOX_GID
from sandboxd.executor.main import STATE_DIR

CONTAINER = "workspace"
WORKSPACE_MOUNT = "/workspace"
#: The label selecting one instance's objects: a hash of its id.
INSTANCE = "sandboxd.instance"
#: Set on Pods whose sandbox asked for a network: the deny-all policy skips them.
NETWORK = "sandboxd.network"
#: The annotation holding the exact instance id.
INSTANCE_ID = "sandboxd.instance-id"
#: The service's notes (lifetimes) are the claim's annotations with this prefix.
MARK_PREFIX = "sandboxd.mark."
#: A warm Pod's label: which daemon made it (``pool_owner``), the only one to claim it.
POOL_OWNER = "sandboxd.pool-owner"
#: Between the namespace and a warm Pod's random part: ``--`` never comes out
#: of ``object_name`` (its readable part has no leading ``-``), so no
#: instance's name can be a pool name.
_POOL_INFIX = "--pool-"
#: The NetworkPolicy that keeps every sandbox Pod without network.
DENY_ALL_POLICY = "sandboxd-{namespace}-deny-all"
#: What the executor needs and nothing else (SECURITY.md, "Privilege separation").
EXECUTOR_CAPS = ["SETUID", "SETGID", "KILL"]
#: The Pod Security Standard level sandbox Pods meet: the executor keeps
#: root's uid with SETUID/SETGID (to act as the sandbox user per thread), which
#: `restricted` forbids (runAsNonRoot, only NET_BIND_SERVICE may be added).
POD_SECURITY_LEVEL = "baseline"
_SELECTOR_LABELS = (labels.MANAGED, labels.NAMESPACE, labels.POOLED)


def instance_hash(instance_id: str) -> str:
    return hashlib.sha256(instance_id.encode()).hexdigest()[:12]


def object_name(namespace: str, instance_id: str) -> str:
    """The Pod's and the claim's name (a DNS label: 63 characters at most)."""
    readable = re.sub(r"[^a-z0-9-]+", "-", instance_id.lower()).strip("-")
    prefix = f"sbx-{namespace}-"
    room = 63 - len(prefix) - 13
    readable = readable[: max(room, 0)].strip("-")
    return (
        f"{prefix}{readable}-{instance_hash(instance_id)}"
        if readable
        else (f"{prefix}{instance_hash(instance_id)}")
    )


def pool_name(namespace: str) -> str:
    """A fresh name for a warm Pod and its claim."""
    return f"sbx-{namespace}{_POOL_INFIX}{secrets.token_hex(6)}"


def pool_owner(identity: str) -> str:
    """A label value (63 characters of ``[a-z0-9.-]``) standing for one daemon."""
    readable = re.sub(r"[^a-z0-9.-]+", "-", identity.lower()).strip("-.")[:50].strip("-.")
    return f"{readable}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}".lstrip("-")


def selector(namespace: str, instance_id: str | None = None) -> str:
    parts = [f"{labels.MANAGED}=true", f"{labels.NAMESPACE}={namespace}"]
    if instance_id is not None:
        parts.append(f"{INSTANCE}={instance_hash(instance_id)}")
    return ",".join(parts)


def metadata(
    namespace: str, instance_id: str, options: SandboxOptions, created_at_ms: int
) -> dict[str, Any]:
    name = object_name(namespace, instance_id)
    every = labels.for_workspace(namespace, name, options, created_at_ms, pooled=False)
    selecting = {key: value for key, value in every.items() if key in _SELECTOR_LABELS}
    selecting[INSTANCE] = instance_hash(instance_id)
    if options.network and options.network.bridged:
        selecting[NETWORK] = "true"
    annotations = {key: value for key, value in every.items() if key not in _SELECTOR_LABELS}
    annotations[INSTANCE_ID] = instance_id
    return {"name": name, "labels": selecting, "annotations": annotations}


def pool_metadata(
    namespace: str, owner: str, options: SandboxOptions, created_at_ms: int
) -> dict[str, Any]:
    """A warm Pod's and claim's metadata: no instance yet, owned by one daemon."""
    name = pool_name(namespace)
    every = labels.for_workspace(namespace, name, options, created_at_ms, pooled=True)
    selecting = {key: value for key, value in every.items() if key in _SELECTOR_LABELS}
    selecting[POOL_OWNER] = owner
    annotations = {key: value for key, value in every.items() if key not in _SELECTOR_LABELS}
    return {"name": name, "labels": selecting, "annotations": annotations}


def pool_selector(namespace: str, owner: str) -> str:
    return f"{selector(namespace)},{labels.POOLED}=true,{POOL_OWNER}={owner}"


def claim_patch(
    owner: str,
    meta: Mapping[str, Any],
    instance_id: str,
    options: SandboxOptions,
    created_at_ms: int,
) -> list[dict[str, Any]]:
    """A JSON patch making the warm claim (or Pod) ``meta`` the instance's.

    Its ``test`` operations make it a compare-and-swap: it applies only while
    the object is still a warm one of ``owner`` (the API server applies a
    patch to the current object, all of it or nothing), so a claim cannot
    be taken twice, nor taken after its daemon's clean-up has let it go.
    The options and the caller's labels are annotations, so they are
    written here: a tenant's sandbox (its label) comes warm too.
    """

    def key(name: str) -> str:  # a JSON pointer token (RFC 6901)
        return name.replace("~", "~0").replace("/", "~1")

    every = labels.for_workspace(
        str(meta["labels"][labels.NAMESPACE]), meta["name"], options, created_at_ms, pooled=False
    )
    notes = {k: v for k, v in every.items() if k not in _SELECTOR_LABELS}
    notes[INSTANCE_ID] = instance_id
    on_labels = "/metadata/labels/"
    return [
        {"op": "test", "path": on_labels + key(labels.POOLED), "value": "true"},
        {"op": "test", "path": on_labels + key(POOL_OWNER), "value": owner},
        {"op": "remove", "path": on_labels + key(labels.POOLED)},
        {"op": "remove", "path": on_labels + key(POOL_OWNER)},
        {"op": "add", "path": on_labels + key(INSTANCE), "value": instance_hash(instance_id)},
        *(
            {"op": "add", "path": "/metadata/annotations/" + key(name), "value": value}
            for name, value in sorted(notes.items())
        ),
    ]


def lease(namespace: str, instance_id: str, holder: str) -> dict[str, Any]:
    """The Lease named like the instance: whoever makes it makes the instance.

    A warm claim has a name of its own, so the name uniqueness that decides a
    create race between replicas (one claim per derived name) is this
    object's instead; it lives as long as the instance.
    """
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": object_name(namespace, instance_id),
            "labels": {
                labels.MANAGED: "true",
                labels.NAMESPACE: namespace,
                INSTANCE: instance_hash(instance_id),
            },
            "annotations": {INSTANCE_ID: instance_id},
        },
        "spec": {"holderIdentity": holder, "acquireTime": now},
    }


def instance_of(meta: Mapping[str, Any]) -> str | None:
    return (meta.get("annotations") or {}).get(INSTANCE_ID)


def options_of(meta: Mapping[str, Any]) -> SandboxOptions:
    return labels.options_from(meta.get("annotations") or {})


def user_labels_of(meta: Mapping[str, Any]) -> dict[str, str]:
    annotations = meta.get("annotations") or {}
    return {
        key[len(labels.USER_PREFIX) :]: value
        for key, value in annotations.items()
        if key.startswith(labels.USER_PREFIX)
    }


def marks_of(meta: Mapping[str, Any]) -> dict[str, str]:
    """The service's notes on a sandbox (service/lifetimes.py), from annotations."""
    annotations = meta.get("annotations") or {}
    return {
        key[len(MARK_PREFIX) :]: value
        for key, value in annotations.items()
        if key.startswith(MARK_PREFIX)
    }


def marks_patch(meta: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """A JSON merge patch replacing the notes with ``values`` (null removes a key)."""
    changes: dict[str, str | None] = {MARK_PREFIX + key: None for key in marks_of(meta)}
    changes.update({MARK_PREFIX + key: value for key, value in values.items()})
    return {"metadata": {"annotations": changes}}


def claim(
    meta: Mapping[str, Any], size_bytes: int, storage_class: str, source: str | None = None
) -> dict[str, Any]:
    """The workspace's claim; ``source``: another claim it starts as a clone of."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": str(size_bytes)}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    if source is not None:
        spec["dataSource"] = {"kind": "PersistentVolumeClaim", "name": source}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": dict(meta),
        "spec": spec,
    }


def pod(
    meta: Mapping[str, Any], options: SandboxOptions, settings: KubernetesSettings
) -> dict[str, Any]:
    """The workspace Pod: the Docker backend's container, in Kubernetes' words."""
    env = {"HOME": "/tmp/home", **container_env(options.env)}
    memory = str(options.memory_bytes)
    tmp = str(settings.tmp_bytes)

    def memory_dir(name: str) -> dict[str, Any]:
        # tmpfs, counted in the Pod's memory as Docker's tmpfs are.
        return {"name": name, "emptyDir": {"medium": "Memory", "sizeLimit": tmp}}

    container = {
        "name": CONTAINER,
        "image": options.image,
        "imagePullPolicy": settings.kube_image_pull_policy,
        # The bootstrap is PID 1 (executor.bundle) and reads its bundle from
        # stdin, which stays open across attaches (stdinOnce false).
        "command": bootstrap_command(settings.executor_python, separate=True),
        "stdin": True,
        "stdinOnce": False,
        "tty": False,
        "workingDir": WORKSPACE_MOUNT,
        "env": [{"name": key, "value": value} for key, value in sorted(env.items())],
        "securityContext": {
            # Root with three capabilities; the workload runs as the sandbox
            # user with none (executor.identity).
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": list(EXECUTOR_CAPS)},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "resources": {
            "limits": {
                "memory": memory,
                "cpu": f"{int(options.cpus * 1000)}m",
                "ephemeral-storage": tmp,
            },
            # Memory requested as limited, so the scheduler places by it;
            # a tenth of the CPU, so idle sandboxes do not reserve cores.
            "requests": {
                "memory": memory,
                "cpu": f"{max(int(options.cpus * 100), 10)}m",
                "ephemeral-storage": "16Mi",
            },
        },
        "volumeMounts": [
            {"name": "workspace", "mountPath": WORKSPACE_MOUNT},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "var-tmp", "mountPath": "/var/tmp"},
            {"name": "state", "mountPath": STATE_DIR},
        ],
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 2,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostname": "sandbox",
        "securityContext": {
            # The claim's files become the sandbox user's group's (a fresh
            # volume's root is root's); checked only at its root.
            "fsGroup": SANDBOX_GID,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": "workspace", "persistentVolumeClaim": {"claimName": meta["name"]}},
            memory_dir("tmp"),
            memory_dir("var-tmp"),
            memory_dir("state"),
        ],
    }
    if options.runtime == Runtime.RUNSC:
        spec["runtimeClassName"] = settings.kube_gvisor_runtime_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": dict(meta), "spec": spec}


def deny_all_policy(namespace: str) -> dict[str, Any]:
    """No ingress and no egress for this daemon's sandbox Pods (but those
    whose sandbox asked for a network): Docker's ``network_mode=none``."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": DENY_ALL_POLICY.format(namespace=namespace),
            "labels": {labels.MANAGED: "true", labels.NAMESPACE: namespace},
        },
        "spec": {
            "podSelector": {
                "matchLabels": {labels.MANAGED: "true", labels.NAMESPACE: namespace},
                "matchExpressions": [{"key": NETWORK, "operator": "DoesNotExist"}],
            },
            "policyTypes": ["Ingress", "Egress"],
        },
    }

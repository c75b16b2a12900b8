"""The cluster's StorageClass (scripts/k8s/provisioner.py): claims become
real ext4 volumes of their size, clones carry their source's files, and a
released volume is removed."""

from __future__ import annotations

import os
import subprocess

from kubernetes import client

from tests.kubernetes.kube import CLUSTER_SH, Cluster, exec_ws, start_pod, wait_for, workspace_pod

STORAGE_CLASS = "sandboxd-local"


def _claim(
    cluster: Cluster, namespace: str, name: str, size: str, source: str | None = None
) -> None:
    cluster.core.create_namespaced_persistent_volume_claim(
        namespace,
        client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                storage_class_name=STORAGE_CLASS,
                resources=client.V1VolumeResourceRequirements(requests={"storage": size}),
                data_source=client.V1TypedLocalObjectReference(
                    kind="PersistentVolumeClaim", name=source, api_group=None
                )
                if source
                else None,
            ),
        ),
    )


def _bound(cluster: Cluster, namespace: str, name: str) -> client.V1PersistentVolumeClaim:
    def bound() -> client.V1PersistentVolumeClaim | None:
        pvc = cluster.core.read_namespaced_persistent_volume_claim(name, namespace)
        return pvc if pvc.status.phase == "Bound" else None

    return wait_for(bound, 60, f"claim {name} to be Bound")


def _claim_in_pod(
    cluster: Cluster, namespace: str, claim: str, size: str, source: str | None = None
) -> None:
    """A Bound claim, mounted at /data of a running Pod of the same name."""
    _claim(cluster, namespace, claim, size, source)
    _bound(cluster, namespace, claim)
    start_pod(
        cluster, namespace, workspace_pod(claim, ["sleep", "infinity"], volumes={claim: "/data"})
    )


def test_claim_is_a_size_limited_volume(cluster: Cluster, namespace: str) -> None:
    _claim(cluster, namespace, "data", "64Mi")
    pvc = _bound(cluster, namespace, "data")
    pv = cluster.core.read_persistent_volume(pvc.spec.volume_name)
    assert pv.spec.local.path and pv.spec.claim_ref.uid == pvc.metadata.uid
    assert pv.spec.node_affinity.required.node_selector_terms[0].match_expressions[0].values == [
        cluster.node_name
    ]

    start_pod(
        cluster,
        namespace,
        workspace_pod("writer", ["sleep", "infinity"], volumes={"data": "/data"}),
    )
    df = exec_ws(cluster, namespace, "writer", ["df", "-B1", "--output=size,fstype", "/data"])
    size, fstype = df.stdout.decode().split()[-2:]
    # ext4 keeps some of the 64 MiB for its journal and tables.
    assert 48 * 2**20 <= int(size) <= 64 * 2**20 and fstype == "ext4", df.stdout
    # The workspace user can write (fsGroup), and no more than the volume holds.
    write = exec_ws(
        cluster,
        namespace,
        "writer",
        ["dd", "if=/dev/zero", "of=/data/big", "bs=1M", "count=100", "conv=fsync"],
    )
    assert write.exit_code != 0
    assert b"No space left on device" in write.stderr
    used = exec_ws(cluster, namespace, "writer", ["stat", "-c", "%s", "/data/big"])
    assert int(used.stdout) < 64 * 2**20


def test_clone_carries_the_source_files(cluster: Cluster, namespace: str) -> None:
    _claim_in_pod(cluster, namespace, "source", "32Mi")
    wrote = exec_ws(
        cluster, namespace, "source", ["sh", "-c", "echo from-the-source > /data/hello && sync"]
    )
    assert wrote.exit_code == 0, wrote.stderr

    # Cloned while the source is mounted and in use (it is frozen for the copy).
    _claim_in_pod(cluster, namespace, "clone", "48Mi", source="source")
    read = exec_ws(cluster, namespace, "clone", ["cat", "/data/hello"])
    assert read.stdout == b"from-the-source\n"
    # A copy, not a shared volume: a change in the clone leaves the source alone;
    # and the clone has the larger size it asked for.
    exec_ws(cluster, namespace, "clone", ["sh", "-c", "echo changed > /data/hello"])
    assert (
        exec_ws(cluster, namespace, "source", ["cat", "/data/hello"]).stdout == b"from-the-source\n"
    )
    sizes = [
        int(
            exec_ws(
                cluster, namespace, pod, ["df", "-B1", "--output=size", "/data"]
            ).stdout.split()[-1]
        )
        for pod in ("source", "clone")
    ]
    assert sizes[1] > sizes[0] + 8 * 2**20, sizes


def test_released_volume_is_removed(cluster: Cluster, namespace: str) -> None:
    _claim(cluster, namespace, "gone", "16Mi")
    pv_name = _bound(cluster, namespace, "gone").spec.volume_name
    image = cluster.core.read_persistent_volume(pv_name).metadata.annotations[
        "sandboxd.dev/volume-image"
    ]
    assert os.path.isfile(image) and _loops_of(image)
    cluster.core.delete_namespaced_persistent_volume_claim("gone", namespace)

    def removed() -> bool:
        try:
            cluster.core.read_persistent_volume(pv_name)
            return False
        except client.ApiException as e:
            return e.status == 404

    wait_for(removed, 60, f"volume {pv_name} to be removed")
    assert not os.path.exists(image) and not _loops_of(image)


def _removed(cluster: Cluster, pv_name: str) -> bool:
    try:
        cluster.core.read_persistent_volume(pv_name)
        return False
    except client.ApiException as e:
        return e.status == 404


def test_a_volume_still_in_use_holds_back_no_claim(cluster: Cluster, namespace: str) -> None:
    """A released volume whose loop device something still holds (as a mount
    left in another mount namespace does while a Pod ends) is removed when
    it is let go, and meanwhile new claims are served: the provisioner once
    waited on such a device and held every claim behind it."""
    _claim(cluster, namespace, "held", "16Mi")
    pv_name = _bound(cluster, namespace, "held").spec.volume_name
    image = cluster.core.read_persistent_volume(pv_name).metadata.annotations[
        "sandboxd.dev/volume-image"
    ]
    [device] = _loops_of(image)
    with open(device, "rb"):
        cluster.core.delete_namespaced_persistent_volume_claim("held", namespace)
        wait_for(
            lambda: cluster.core.read_persistent_volume(pv_name).status.phase == "Released",
            60,
            f"volume {pv_name} to be released",
        )
        # Two claims one after the other: the second needs a pass of the
        # provisioner that begins after the held volume's release was tried.
        for claim in ("next", "after"):
            _claim(cluster, namespace, claim, "16Mi")
            _bound(cluster, namespace, claim)
        assert not _removed(cluster, pv_name) and _loops_of(image) == [device]
    wait_for(lambda: _removed(cluster, pv_name), 60, f"volume {pv_name} to be removed")
    assert not os.path.exists(image) and not _loops_of(image)


def _loops_of(image: str) -> list[str]:
    out = subprocess.run(
        ["losetup", "-n", "-O", "NAME", "-j", image], capture_output=True, text=True
    )
    return out.stdout.split()


def test_volume_comes_back_after_cluster_restart(cluster: Cluster, namespace: str) -> None:
    _claim_in_pod(cluster, namespace, "kept", "16Mi")
    wrote = exec_ws(cluster, namespace, "kept", ["sh", "-c", "echo survives > /data/f && sync"])
    assert wrote.exit_code == 0, wrote.stderr

    # down unmounts the volume and detaches its loop device; up mounts it again
    # before the kubelet starts any Pod.
    for step in ("down", "up"):
        result = subprocess.run(
            [str(CLUSTER_SH), step], capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stderr[-2000:]
    start_pod(
        cluster, namespace, workspace_pod("after", ["sleep", "infinity"], volumes={"kept": "/data"})
    )
    assert exec_ws(cluster, namespace, "after", ["cat", "/data/f"]).stdout == b"survives\n"

#!/usr/bin/env python3
"""The test cluster's volume provisioner (TEST-CLUSTER INFRASTRUCTURE ONLY).

A host process that scripts/k8s/cluster.sh starts beside the kubelet. It
serves the StorageClass `sandboxd-local` (provisioner sandboxd.dev/loop-volume)
with real, size-limited volumes: each claim gets an ext4 image file of the
requested size, attached to a loop device and mounted on the node, exposed as
a `local` PersistentVolume pinned to the node and pre-bound to the claim
(claimRef). Writing past the size fails with ENOSPC, as on a real disk.

- Clone: a claim whose dataSource is another claim (same namespace, Bound to
  one of these volumes) gets a copy of its image (cp --reflink=auto, the
  source frozen with fsfreeze during the copy so the copy is consistent),
  grown to the requested size if that is larger.
- Release: when the claim is deleted (reclaim policy Delete) or the volume is
  deleted, it unmounts, detaches the loop device, removes the image and the
  PersistentVolume (a finalizer of its own keeps the object until then).
- Restart: on start (and every pass) every volume it made is attached and
  mounted again, so volumes survive `cluster.sh down` / `up`.

Python standard library only; it talks to the API server's REST API with the
client certificate of its kubeconfig (identity system:sandboxd-k8s:provisioner,
ClusterRole sandboxd-k8s:provisioner in manifests/bootstrap.yaml). It polls
(one list of classes, claims and volumes a second) rather than watching: a
test cluster's few claims make that cheap, and a poll cannot miss an event.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

PROVISIONER = "sandboxd.dev/loop-volume"
FINALIZER = "sandboxd.dev/loop-volume"
IMAGE_ANNOTATION = "sandboxd.dev/volume-image"
LABELS = {"sandboxd.dev/test-cluster": "true"}
MIN_BYTES = 16 * 2**20
_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "": 1,
}  # fmt: skip


class ProvisionError(Exception):
    """A claim that cannot be served; reported as an event on the claim."""


def parse_quantity(text: str) -> int:
    """Bytes of a Kubernetes quantity ("64Mi", "1G", "1e9", "512"), rounded up."""
    m = re.fullmatch(
        r"([0-9]+(?:\.[0-9]+)?)(?:([eE][0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?)", text
    )
    if not m:
        raise ProvisionError(f"cannot read the size {text!r}")
    number, exponent, suffix = m.groups()
    value = float(number) * (10 ** int(exponent[1:]) if exponent else _SUFFIXES[suffix or ""])
    return int(-(-value // 1))


# ---- the API server ------------------------------------------------------------


@dataclass
class Api:
    host: str
    port: int
    context: ssl.SSLContext

    @classmethod
    def from_kubeconfig(cls, path: str, certdir: str) -> Api:
        with open(path) as f:
            text = f.read()

        def field(name: str) -> str:
            m = re.search(rf"^\s*{name}:\s*(\S+)\s*$", text, re.M)
            if not m:
                raise SystemExit(f"{path}: no {name}")
            return m.group(1)

        server = urllib.parse.urlsplit(field("server"))
        files = {}
        for name in ("certificate-authority-data", "client-certificate-data", "client-key-data"):
            files[name] = os.path.join(certdir, name)
            with open(files[name], "wb") as out:
                out.write(base64.b64decode(field(name)))
        context = ssl.create_default_context(cafile=files["certificate-authority-data"])
        context.load_cert_chain(files["client-certificate-data"], files["client-key-data"])
        return cls(server.hostname or "", server.port or 443, context)

    def call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
        finally:
            conn.close()
        if resp.status == 404 and method in ("DELETE", "GET"):
            return None
        if resp.status >= 300:
            raise ApiError(resp.status, f"{method} {path}: {resp.status} {payload[:300]!r}")
        return json.loads(payload) if payload else None


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# ---- the host side of a volume -----------------------------------------------------


#: No host command may hold the one loop: a hung one (umount, fsfreeze)
#: would stop every claim behind it from being served.
RUN_TIMEOUT_S = 120


def run(*argv: str, ok: tuple[int, ...] = (0,)) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ProvisionError(f"{' '.join(argv)}: no answer in {RUN_TIMEOUT_S} s") from None
    if result.returncode not in ok:
        raise ProvisionError(f"{' '.join(argv)}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def loop_of(image: str) -> str | None:
    out = run("losetup", "-j", image, "-n", "-O", "NAME")
    names = out.split()
    return names[0] if names else None


def is_mounted(path: str) -> bool:
    return subprocess.run(["mountpoint", "-q", path]).returncode == 0


def attach_and_mount(image: str, mount: str) -> None:
    os.makedirs(mount, exist_ok=True)
    if is_mounted(mount):
        return
    # Immutable while nothing is mounted on it: a Pod started on it before the
    # volume is mounted gets EPERM instead of writing to the node's own disk.
    # Mounting over it is unaffected.
    run("chattr", "+i", mount)
    device = loop_of(image) or run("losetup", "--find", "--show", image).strip()
    run("mount", "-t", "ext4", "-o", "nosuid,nodev", device, mount)


def unmount_and_detach(image: str, mount: str) -> None:
    if is_mounted(mount):
        run("umount", mount)  # busy (still used by a Pod): raises, retried next pass
    device = loop_of(image)
    if device is not None:
        # On a device still in use (a mount left in another mount namespace
        # while a Pod ends) `losetup -d` only marks it to go when its last
        # user does, and succeeds: waiting here for it to go spun for minutes
        # and held every claim behind it (a sandbox Pending 60 s in CI). One
        # detach a pass; the volume is released in a later pass.
        with contextlib.suppress(ProvisionError):  # gone since it was looked up
            run("losetup", "-d", device)
        if loop_of(image) is not None:
            raise ProvisionError(f"{device} is still in use; released when its last user goes")
    if os.path.isdir(mount):
        run("chattr", "-i", mount)
        os.rmdir(mount)
    if os.path.exists(image):
        os.remove(image)


# ---- the provisioner -------------------------------------------------------------------


class Provisioner:
    def __init__(self, api: Api, volumes: str, node: str, max_bytes: int) -> None:
        self.api = api
        self.images = os.path.join(volumes, "images")
        self.mounts = os.path.join(volumes, "mnt")
        self.node = node
        self.max_bytes = max_bytes
        # The last failure reported per claim: a claim that keeps failing
        # gets one event per distinct reason, not one per pass.
        self.reported: dict[str, str] = {}
        self.first_pass_done = False
        os.makedirs(self.images, exist_ok=True)
        os.makedirs(self.mounts, exist_ok=True)

    def paths(self, pv_name: str) -> tuple[str, str]:
        return os.path.join(self.images, pv_name + ".img"), os.path.join(self.mounts, pv_name)

    def sync(self) -> None:
        classes = {
            sc["metadata"]["name"]: sc
            for sc in self.api.call("GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]
            if sc.get("provisioner") == PROVISIONER
        }
        pvs = self.api.call("GET", "/api/v1/persistentvolumes")["items"]
        ours = {
            pv["metadata"]["name"]: pv
            for pv in pvs
            if pv["metadata"].get("annotations", {}).get("pv.kubernetes.io/provisioned-by")
            == PROVISIONER
        }
        # Claims before releases (a Pod waits on each claim; a release can
        # wait), except on the first pass: volumes made before a restart are
        # mounted again before the kubelet, started after it, runs a Pod.
        first, self.first_pass_done = not self.first_pass_done, True
        if first:
            self.reconcile_volumes(ours)
        self.provision_pending(classes, ours)
        if not first:
            self.reconcile_volumes(ours)

    def reconcile_volumes(self, ours: dict[str, Any]) -> None:
        for pv in ours.values():
            self.reconcile_volume(pv)

    def provision_pending(self, classes: dict[str, Any], ours: dict[str, Any]) -> None:
        for pvc in self.api.call("GET", "/api/v1/persistentvolumeclaims")["items"]:
            spec, meta = pvc["spec"], pvc["metadata"]
            if (
                spec.get("storageClassName") in classes
                and not spec.get("volumeName")
                and pvc.get("status", {}).get("phase") == "Pending"
                and not meta.get("deletionTimestamp")
                and "pvc-" + meta["uid"] not in ours
            ):
                try:
                    self.provision(pvc, classes[spec["storageClassName"]], ours)
                except (ProvisionError, ApiError) as e:
                    if self.reported.get(meta["uid"]) != str(e):
                        self.reported[meta["uid"]] = str(e)
                        print(f"claim {meta['namespace']}/{meta['name']}: {e}", flush=True)
                        self.event(pvc, "Warning", "ProvisioningFailed", str(e))

    def reconcile_volume(self, pv: dict[str, Any]) -> None:
        name = pv["metadata"]["name"]
        image, mount = self.paths(name)
        released = pv.get("status", {}).get("phase") in ("Released", "Failed")
        deleting = bool(pv["metadata"].get("deletionTimestamp"))
        policy = pv["spec"].get("persistentVolumeReclaimPolicy", "Delete")
        try:
            if deleting or (released and policy == "Delete"):
                unmount_and_detach(image, mount)
                finalizers = [f for f in pv["metadata"].get("finalizers", []) if f != FINALIZER]
                self.api.call(
                    "PATCH",
                    f"/api/v1/persistentvolumes/{name}",
                    {
                        "metadata": {
                            "finalizers": finalizers,
                            "resourceVersion": pv["metadata"]["resourceVersion"],
                        }
                    },
                    "application/merge-patch+json",
                )
                if not deleting:
                    self.api.call("DELETE", f"/api/v1/persistentvolumes/{name}")
                print(f"volume {name}: deleted", flush=True)
            elif os.path.exists(image):
                attach_and_mount(image, mount)
        except (ProvisionError, ApiError, OSError) as e:
            print(f"volume {name}: {e} (retrying)", flush=True)

    def provision(self, pvc: dict[str, Any], sc: dict[str, Any], ours: dict[str, Any]) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        if spec.get("volumeMode", "Filesystem") != "Filesystem":
            raise ProvisionError("only volumeMode Filesystem is served")
        request = spec.get("resources", {}).get("requests", {}).get("storage")
        if not request:
            raise ProvisionError("the claim requests no storage size")
        size = max(parse_quantity(request), MIN_BYTES)
        size = -(-size // 2**20) * 2**20
        if size > self.max_bytes:
            raise ProvisionError(
                f"{request} is more than this test cluster's limit of {self.max_bytes} bytes"
            )
        name = "pvc-" + meta["uid"]
        image, mount = self.paths(name)
        tmp = image + ".tmp"
        source = spec.get("dataSource") or spec.get("dataSourceRef")
        try:
            if source:
                self.clone(pvc, source, ours, tmp, size)
            else:
                run("truncate", "-s", str(size), tmp)
                run("mkfs.ext4", "-q", "-F", "-m", "0", "-L", name[:16], tmp)
        finally:
            if os.path.exists(tmp) and sys.exc_info()[0] is not None:
                os.remove(tmp)
        os.replace(tmp, image)
        try:
            attach_and_mount(image, mount)
            self.api.call(
                "POST",
                "/api/v1/persistentvolumes",
                self.volume_object(pvc, sc, name, mount, request),
            )
        except (ProvisionError, ApiError):
            unmount_and_detach(image, mount)
            raise
        print(f"claim {meta['namespace']}/{meta['name']}: volume {name} ({size} bytes)", flush=True)
        self.event(
            pvc,
            "Normal",
            "ProvisioningSucceeded",
            f"volume {name}: ext4 on a loop device, {request}",
        )

    def clone(
        self, pvc: dict[str, Any], source: dict[str, Any], ours: dict[str, Any], tmp: str, size: int
    ) -> None:
        ns = pvc["metadata"]["namespace"]
        if source.get("kind") != "PersistentVolumeClaim" or source.get("apiGroup"):
            raise ProvisionError(
                "a dataSource must be a PersistentVolumeClaim (snapshots are not served)"
            )
        src = self.api.call(
            "GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{source['name']}"
        )
        if src is None:
            raise ProvisionError(f"the source claim {ns}/{source['name']} does not exist")
        src_pv = ours.get(src["spec"].get("volumeName", ""))
        if src_pv is None or src.get("status", {}).get("phase") != "Bound":
            raise ProvisionError(
                f"the source claim {ns}/{source['name']} is not Bound to a {PROVISIONER} volume"
            )
        src_image, src_mount = self.paths(src_pv["metadata"]["name"])
        if size < os.path.getsize(src_image):
            raise ProvisionError("a clone cannot be smaller than its source")
        frozen = False
        if is_mounted(src_mount):
            run("fsfreeze", "-f", src_mount)
            frozen = True
        try:
            run("cp", "--reflink=auto", "--sparse=always", src_image, tmp)
        finally:
            if frozen:
                run("fsfreeze", "-u", src_mount)
        # A copy of a mounted (frozen) source is as after a crash: its
        # journal needs replaying before tune2fs or resize2fs touch it;
        # 1 = "errors corrected" (the journal replayed), not a failure.
        run("e2fsck", "-f", "-y", tmp, ok=(0, 1))
        if size > os.path.getsize(tmp):
            run("truncate", "-s", str(size), tmp)
            run("resize2fs", tmp)
        # The copy carries the source's UUID; give it its own.
        run("tune2fs", "-U", "random", tmp)

    def volume_object(
        self, pvc: dict[str, Any], sc: dict[str, Any], name: str, mount: str, request: str
    ) -> dict[str, Any]:
        meta, spec = pvc["metadata"], pvc["spec"]
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "labels": LABELS,
                "annotations": {
                    "pv.kubernetes.io/provisioned-by": PROVISIONER,
                    IMAGE_ANNOTATION: self.paths(name)[0],
                },
                "finalizers": [FINALIZER],
            },
            "spec": {
                "capacity": {"storage": request},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy", "Delete"),
                "storageClassName": spec["storageClassName"],
                "volumeMode": "Filesystem",
                "local": {"path": mount, "fsType": "ext4"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": [self.node],
                                    }
                                ]
                            }
                        ]
                    }
                },
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }

    def event(self, pvc: dict[str, Any], kind: str, reason: str, message: str) -> None:
        meta = pvc["metadata"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": meta["name"] + ".", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "type": kind,
            "reason": reason,
            "message": message[:1000],
            "source": {"component": PROVISIONER},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.api.call("POST", f"/api/v1/namespaces/{meta['namespace']}/events", body)
        except ApiError as e:
            print(f"event not recorded: {e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volumes", required=True, help="folder of the images and mount points")
    parser.add_argument("--node", required=True, help="the node the volumes are on")
    parser.add_argument("--ready-file", help="touched after the first complete pass")
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--max-size", default="64Gi", help="largest volume served")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    with tempfile.TemporaryDirectory(prefix="sandboxd-k8s-provisioner-") as certdir:
        api = Api.from_kubeconfig(args.kubeconfig, certdir)
        provisioner = Provisioner(api, args.volumes, args.node, parse_quantity(args.max_size))
        ready = False
        while True:
            try:
                provisioner.sync()
                if not ready and args.ready_file:
                    open(args.ready_file, "w").close()
                    ready = True
            except (ApiError, OSError, ProvisionError) as e:
                print(f"pass failed: {e}", flush=True)
            time.sleep(args.interval)


if __name__ == "__main__":
    main()

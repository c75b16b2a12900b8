"""The kubernetes backend's pure parts: names, the Pod it asks for, the relay.

The backend against a real cluster is the kubernetes tier (tests/kubernetes).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sandboxd.backends.kubernetes import manifests
from sandboxd.backends.kubernetes.backend import CLONE_METHOD, _storage_bytes
from sandboxd.backends.kubernetes.relay import NO_EXECUTOR, RELAY
from sandboxd.backends.shared.options import effective
from sandboxd.contract.models import FORK_METHODS, NetworkPolicy, Runtime, SandboxOptions
from sandboxd.daemon.settings import Settings
from sandboxd.executor.main import STATE_DIR

pytestmark = [pytest.mark.unit]


def test_names_are_dns_labels_and_tell_every_id_apart() -> None:
    ids = ["A", "a", "x_y", "x.y", "x-y", "Z" * 128, "0"]
    names = [manifests.object_name("default", i) for i in ids]
    assert len(set(names)) == len(ids)
    for name in names:
        assert len(name) <= 63
        assert name == name.lower()
        assert all(c.isalnum() or c == "-" for c in name)
        assert name[0].isalnum() and name[-1].isalnum()


def test_warm_names_and_owners_are_labels_no_instance_can_take() -> None:
    warm = {manifests.pool_name("ns") for _ in range(20)}
    assert len(warm) == 20
    ids = ["pool", "-pool-x", "pool-0123456789ab", "x--pool-y"]
    for name in warm:
        assert len(name) <= 63 and name[0].isalnum() and name[-1].isalnum()
        assert name not in {manifests.object_name("ns", i) for i in ids}
        # object_name never puts "--" right after the namespace (below).
        assert name.startswith("sbx-ns--pool-")
    assert not any(manifests.object_name("ns", i).startswith("sbx-ns--") for i in ids)
    for host in ("node-1", "A_Very.Long" * 10, "-"):
        owner = manifests.pool_owner(host)
        assert len(owner) <= 63 and owner[0].isalnum() and owner[-1].isalnum()
        assert all(c.isalnum() or c in ".-" for c in owner)
    assert manifests.pool_owner("a") != manifests.pool_owner("A")


def test_the_claim_patch_is_a_compare_and_swap_on_the_warm_labels() -> None:
    warm = manifests.pool_metadata("ns", "me", SandboxOptions(), 1)
    patch = manifests.claim_patch("me", warm, "inst/1", SandboxOptions(labels={"tenant": "t"}), 5)
    tests = [op for op in patch if op["op"] == "test"]
    # Both conditions come first: nothing applies unless the claim is still
    # warm and this daemon's.
    assert patch[: len(tests)] == tests
    assert {(op["path"], op["value"]) for op in tests} == {
        ("/metadata/labels/sandboxd.pooled", "true"),
        (f"/metadata/labels/{manifests.POOL_OWNER}", "me"),
    }
    added = {op["path"]: op["value"] for op in patch if op["op"] == "add"}
    assert added[f"/metadata/labels/{manifests.INSTANCE}"] == manifests.instance_hash("inst/1")
    assert added[f"/metadata/annotations/{manifests.INSTANCE_ID}"] == "inst/1"
    # The caller's labels (a tenant's) and the options with them are written too.
    assert added["/metadata/annotations/sandboxd.user.tenant"] == "t"
    written = {"annotations": {k.rsplit("/", 1)[1]: v for k, v in added.items()}}
    assert manifests.options_of(written).labels == {"tenant": "t"}
    lease = manifests.lease("ns", "inst/1", "me")
    assert lease["metadata"]["name"] == manifests.object_name("ns", "inst/1")
    assert lease["metadata"]["annotations"][manifests.INSTANCE_ID] == "inst/1"


def test_the_pod_carries_dockers_isolation() -> None:
    settings = Settings.from_arguments()
    options = effective(SandboxOptions(runtime=Runtime.RUNSC), settings)
    meta = manifests.metadata("ns", "Some_Id", options, 1)
    pod = manifests.pod(meta, options, settings)
    spec = pod["spec"]
    [container] = spec["containers"]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["SETUID", "SETGID", "KILL"]}
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert not any("hostPath" in volume for volume in spec["volumes"])
    assert spec["runtimeClassName"] == settings.kube_gvisor_runtime_class
    assert container["stdin"] is True and container["stdinOnce"] is False
    assert container["resources"]["limits"]["memory"] == str(options.memory_bytes)
    # The id and the options travel as annotations; labels select.
    assert meta["annotations"][manifests.INSTANCE_ID] == "Some_Id"
    assert manifests.options_of(meta) == options
    assert meta["labels"][manifests.INSTANCE] == manifests.instance_hash("Some_Id")


def test_only_sandboxes_asking_for_a_network_escape_the_deny_all_policy() -> None:
    policy = manifests.deny_all_policy("ns")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy["spec"] and "egress" not in policy["spec"]
    with_net = manifests.metadata("ns", "i", SandboxOptions(network=True), 1)
    without = manifests.metadata("ns", "i", SandboxOptions(), 1)
    assert manifests.NETWORK in with_net["labels"]
    assert manifests.NETWORK not in without["labels"]
    # Mode allow keeps the deny-all policy: its traffic rides the executor
    # channel to the daemon's gateway, and a program that ignores the proxy
    # has no route (tests/kubernetes/test_network.py: kube-router enforces it).
    allow = NetworkPolicy(mode="allow", allow=("pypi.org",))
    for policy_ in (allow, NetworkPolicy(mode="none")):
        meta = manifests.metadata("ns", "i", SandboxOptions(network=policy_), 1)
        assert manifests.NETWORK not in meta["labels"]
    full = manifests.metadata("ns", "i", SandboxOptions(network=NetworkPolicy(mode="full")), 1)
    assert manifests.NETWORK in full["labels"]
    # The policy itself rides the annotations (labels.for_workspace's options).
    gated = manifests.metadata("ns", "i", SandboxOptions(network=allow), 1)
    stored = [v for v in gated["annotations"].values() if '"pypi.org"' in v]
    assert len(stored) == 1
    assert SandboxOptions.from_json(json.loads(stored[0])).network == allow


def test_the_fork_method_is_a_known_one() -> None:
    assert CLONE_METHOD in FORK_METHODS


@pytest.mark.parametrize(
    ("text", "size"), [("268435456", 256 << 20), ("1Gi", 1 << 30), ("64Mi", 64 << 20), ("x", 0)]
)
def test_claim_sizes_are_read(text: str, size: int) -> None:
    assert _storage_bytes({"spec": {"resources": {"requests": {"storage": text}}}}) == size


def _relay(state: Path, wait: str) -> subprocess.Popen[bytes]:
    code = RELAY.replace(repr(STATE_DIR + "/"), repr(str(state) + "/"), 1)
    code = code.replace(STATE_DIR + "/", str(state) + "/", 1)
    return subprocess.Popen(
        [sys.executable, "-I", "-c", code, wait],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="the relay checks that the listener is root")
def test_the_relay_copies_both_ways_and_passes_the_half_close_on(tmp_path: Path) -> None:
    folder = tmp_path / ("a" * 16)
    folder.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "s"))
    listener.listen(1)
    got = bytearray()

    def serve() -> None:
        conn, _ = listener.accept()
        while chunk := conn.recv(65536):
            got.extend(chunk)
        conn.sendall(b"reply:" + bytes(got[:5]))
        conn.close()

    server = threading.Thread(target=serve)
    server.start()
    relay = _relay(tmp_path, "5")
    out, err = relay.communicate(b"hello" + b"x" * 3_000_000, timeout=30)
    server.join(10)
    assert relay.returncode == 0, err
    assert len(got) == 3_000_005
    assert out == b"reply:hello"


def test_the_relay_says_when_there_is_no_executor(tmp_path: Path) -> None:
    relay = _relay(tmp_path, "0.2")
    _, err = relay.communicate(b"", timeout=30)
    assert relay.returncode == NO_EXECUTOR
    assert b"no executor socket" in err


@pytest.mark.anyio
async def test_snapshots_and_templates_say_they_are_not_supported_and_count_nothing() -> None:
    from sandboxd.backends.kubernetes.backend import KubernetesBackend
    from sandboxd.contract.errors import InvalidArgument

    backend = KubernetesBackend(Settings(backend="kubernetes"))
    # Listing answers (empty): a tenant's create and GetStatus count snapshots' bytes.
    assert list(await backend.snapshots("acme")) == []
    with pytest.raises(InvalidArgument, match="named snapshots are not supported on the kub"):
        await backend.snapshot("a", "s", "acme")
    with pytest.raises(InvalidArgument, match="named snapshots are not supported"):
        await backend.restore("a", "s", "acme")
    with pytest.raises(InvalidArgument, match="templates are not supported on the kubernetes"):
        async for _ in backend.build_template(Path("/nonexistent"), "Dockerfile"):
            pass


def _unschedulable(message: str) -> dict[str, object]:
    condition = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }
    return {"status": {"conditions": [condition]}}


def test_an_unschedulable_pod_is_a_verdict_unless_its_claim_is_on_the_way() -> None:
    from sandboxd.backends.kubernetes.workspace import KubernetesWorkspace
    from sandboxd.contract.errors import ResourceExhausted

    workspace = object.__new__(KubernetesWorkspace)
    workspace._instance_id = "box"
    workspace._options = SandboxOptions()
    with pytest.raises(ResourceExhausted, match="Insufficient memory"):
        workspace._raise_if_hopeless(
            _unschedulable("0/1 nodes are available: 1 Insufficient memory."), {}
        )
    # The claim not yet in the scheduler's cache (seen in CI) or not yet bound: wait on.
    for message in (
        '0/1 nodes are available: persistentvolumeclaim "sbx-a-box-1" not found.',
        "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    ):
        workspace._raise_if_hopeless(_unschedulable(message), {})


def test_a_pod_that_does_not_start_says_what_holds_it_back() -> None:
    from sandboxd.backends.kubernetes.workspace import _why_pending

    unbound = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    pod = _unschedulable(unbound)
    pod["status"]["phase"] = "Pending"  # type: ignore[index]
    assert _why_pending(pod) == (
        "phase Pending; PodScheduled false (Unschedulable: 0/1 nodes are available: "
        "pod has unbound immediate PersistentVolumeClaims.)"
    )
    waiting = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {"name": manifests.CONTAINER, "state": {"waiting": {"reason": "ContainerCreating"}}}
            ],
        }
    }
    assert _why_pending(waiting) == "phase Pending; container waiting: ContainerCreating"
    assert _why_pending({}) == "phase unknown"

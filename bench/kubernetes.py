"""The kubernetes column of ``make bench`` (issue 24 item 7): the same daemon
with ``--backend kubernetes`` on the test cluster (``make k8s``), measured in
the same run as the Docker backend.

    python -m bench.kubernetes      # this part alone (needs the cluster up)

When ``scripts/k8s/cluster.sh`` finds no cluster that answers, there is no
column and the run says so. What it measures: the per-operation table's
``sandboxd kubernetes`` column (``bench.run`` adds the subject), create ->
first command cold and from the warm pool, delete, calls/s over 8
sandboxes, and a 1 GiB upload through the API server's exec stream. The
daemon is stopped (its warm pool removed) and the cluster namespace the run
made is deleted with everything in it at the end.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import fixtures as fx
from bench import scenarios
from bench.resources import IMAGE, Daemon, Resources
from bench.stats import summarize
from runtime_client import GrpcSandboxFactory, SandboxOptions

CLUSTER_SH = Path(__file__).resolve().parents[1] / "scripts" / "k8s" / "cluster.sh"
#: The Pod Security Standard the sandbox namespace enforces (README).
POD_SECURITY = "pod-security.kubernetes.io/enforce=baseline"
#: Warm Pods kept: the Docker daemon's default pool size, for a like comparison.
POOL_SIZE = 2
#: The 1 GiB upload needs a claim larger than the default 1 GiB.
BIG_DISK = 2 << 30
GiB = 1 << 30


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _cluster(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLUSTER_SH), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def kubeconfig() -> str | None:
    """The test cluster's admin kubeconfig, if a cluster is up and answers."""
    if os.geteuid() != 0 or not CLUSTER_SH.exists():
        return None
    found = _cluster("kubeconfig")
    if found.returncode != 0:
        return None
    if _cluster("kubectl", "get", "--raw", "/readyz", timeout=15).returncode != 0:
        return None
    return found.stdout.strip()


def start(res: Resources) -> Daemon | None:
    """A kubernetes-backend daemon in a fresh cluster namespace, or None (no cluster)."""
    config = kubeconfig()
    if config is None:
        log("no Kubernetes test cluster answers (make k8s): no kubernetes column")
        return None
    namespace = f"sbx-bench-{res.run_id}"
    made = _cluster("kubectl", "create", "namespace", namespace)
    if made.returncode != 0:
        raise RuntimeError(f"cannot create namespace {namespace}: {made.stderr}")
    res.cleanups.append(lambda: _drop(namespace))
    _cluster("kubectl", "label", "namespace", namespace, POD_SECURITY)
    _cluster("kubectl", "label", "namespace", namespace, f"sandboxd.bench.run={res.run_id}")
    log(f"starting sandboxd --backend kubernetes (cluster namespace {namespace})")
    return res.start_daemon(
        "--backend", "kubernetes",
        "--kubeconfig", config,
        "--kube-namespace", namespace,
        "--image", IMAGE,
        "--kube-pool-size", str(POOL_SIZE),
        suffix="-k8s",
        timeout=120,
    )  # fmt: skip


def _drop(namespace: str) -> None:
    _cluster("kubectl", "delete", "pods", "--all", "-n", namespace, "--grace-period=0")
    _cluster("kubectl", "delete", "namespace", namespace, "--wait=false")


async def lifecycle(target: str, n: int) -> dict[str, Any]:
    """Create -> first command, cold (options the pool cannot serve) and warm."""
    cold, cold_deletes = await scenarios.create_to_first_command_samples(
        target, cold=True, n=n, prefix="k8s-cold"
    )
    log(f"  kubernetes cold create -> first bash p50 {summarize(cold).p50:.0f} ms")
    warm, warm_deletes = await scenarios.create_to_first_command_samples(
        target, cold=False, n=n, prefix="k8s-warm"
    )
    log(f"  kubernetes warm create -> first bash p50 {summarize(warm).p50:.1f} ms")
    return {
        "cold_create": summarize(cold),
        "warm_create": summarize(warm),
        "delete": summarize(cold_deletes + warm_deletes),
    }


async def throughput(target: str, seconds: float) -> dict[str, Any]:
    count = fx.THROUGHPUT_SANDBOXES
    results: dict[str, Any] = {}
    async with GrpcSandboxFactory(target) as factory:
        boxes = await asyncio.gather(*(factory.create_sandbox(f"k8s-tp-{i}") for i in range(count)))
        for box in boxes:
            await box.write_file(fx.READ_FILE, fx.KIB_TEXT)
        await scenarios.wait_pool_full(factory, timeout=180)
        for kind, (tool, tool_args, callers) in fx.THROUGHPUT_KINDS.items():
            results[kind] = await scenarios.throughput(
                list(boxes), tool=tool, args=tool_args, callers=callers, seconds=seconds
            )
            log(f"  kubernetes {kind}: {results[kind]['calls_per_s']:.0f} calls/s")
        await asyncio.gather(*(box.delete() for box in boxes))
    return results


async def _gib() -> Any:
    block = os.urandom(1 << 20)
    for _ in range(GiB >> 20):
        yield block


async def upload_1gib(target: str) -> dict[str, Any]:
    """One 1 GiB file up through the exec stream, read back by size."""
    options = SandboxOptions(disk_bytes=BIG_DISK)
    async with GrpcSandboxFactory(target, options=options) as factory:
        box = await factory.create_sandbox("k8s-upload")
        try:
            started = time.perf_counter()
            await box.upload("big.bin", _gib())
            seconds = time.perf_counter() - started
            size = (await box.exec("stat -c %s /workspace/big.bin")).stdout.strip()
            if int(size) != GiB:
                raise RuntimeError(f"the 1 GiB upload arrived as {size!r} bytes")
        finally:
            await box.delete()
    log(f"  kubernetes 1 GiB upload: {GiB / 1e6 / seconds:.0f} MB/s")
    return {"upload_1gib_mb_s": round(GiB / 1e6 / seconds, 1), "upload_1gib_s": round(seconds, 2)}


async def measure(target: str, lifecycle_n: int, throughput_s: float) -> dict[str, Any]:
    """Everything but the per-operation column (bench.run times that with the rest)."""
    results = await lifecycle(target, lifecycle_n)
    results["throughput"] = await throughput(target, throughput_s)
    results["transfer"] = await upload_1gib(target)
    return results


def render(k8s: dict[str, Any], docker_life: dict[str, Any] | None) -> str:
    from bench.report import _grid, _triple

    if "skipped" in k8s:
        return f"Kubernetes: skipped ({k8s['skipped']})"
    life = docker_life or {}
    rows = [
        [what, _triple(life.get(key)), _triple(k8s.get(key))]
        for what, key in (
            ("cold create -> first bash", "cold_create"),
            ("warm-pool create -> first bash", "warm_create"),
            ("delete", "delete"),
        )
    ]
    for kind, value in k8s.get("throughput", {}).items():
        docker_tp = ((docker_life or {}).get("throughput") or {}).get(kind) or {}
        rows.append(
            [
                f"{kind} calls/s, {value['sandboxes']} x {value['callers_per_sandbox']}",
                str(docker_tp.get("calls_per_s", "-")),
                str(value["calls_per_s"]),
            ]
        )
    transfer = k8s.get("transfer") or {}
    if transfer:
        rows.append(["1 GiB upload, MB/s", "-", str(transfer["upload_1gib_mb_s"])])
    headers = ["Kubernetes vs Docker, same run (ms p50 / p95 / p99)", "docker", "kubernetes"]
    return _grid(headers, rows)


def main() -> int:
    from bench.report import _grid  # noqa: F401  (render's import, checked early)

    res = Resources()
    try:
        daemon = start(res)
        if daemon is None:
            return 1
        results = asyncio.run(measure(daemon.target, 8, 5.0))
        print(render(results, None))
    finally:
        res.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

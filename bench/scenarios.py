"""The whole-sandbox measurements: create, delete, throughput, memory, big files."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import docker
from docker.models.containers import Container

from bench import fixtures as fx
from bench.resources import IMAGE, Daemon
from bench.stats import Summary, summarize
from runtime_client import GrpcSandboxFactory, Runtime, Sandbox, SandboxOptions, SandboxToolResult
from sandboxd.backends.shared import labels

#: Options the warm pool cannot serve, so a create goes the cold path.
COLD = SandboxOptions(env={"BENCH_COLD": "1"})
#: The gVisor column: the pool holds runc workspaces, so every runsc create is cold.
RUNSC = SandboxOptions(runtime=Runtime.RUNSC)


def _ok(result: SandboxToolResult, what: str) -> SandboxToolResult:
    if result.is_error:
        raise RuntimeError(f"{what} failed: {result.text[:300]}")
    return result


# ---------------------------------------------------------------- lifecycle


def bare_docker_run(
    client: docker.DockerClient, labels: dict[str, str], n: int, image: str = IMAGE
) -> Summary:
    """``docker run --rm IMAGE true`` with the workspace isolation (no volume)."""

    def once() -> float:
        start = time.perf_counter()
        client.containers.run(
            image,
            ["true"],
            remove=True,
            labels=labels,
            user="1000:1000",
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            init=True,
            tmpfs={"/tmp": "rw,nosuid,nodev,size=268435456,mode=1777"},
        )
        return time.perf_counter() - start

    once()  # warm-up
    return summarize([once() for _ in range(n)])


async def wait_pool_full(factory: GrpcSandboxFactory, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pool = (await factory.transport.get_status()).pool
        if pool.ready >= max(pool.size, 1):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the warm pool did not refill in time")


async def create_to_first_command(
    target: str, *, cold: bool, n: int, prefix: str, options: SandboxOptions | None = None
) -> tuple[Summary, list[float]]:
    """Create -> first ``bash true`` answered, and the deletes that follow."""
    creates, deletes = await create_to_first_command_samples(
        target, cold=cold, n=n, prefix=prefix, options=options
    )
    return summarize(creates), deletes


async def create_to_first_command_samples(
    target: str, *, cold: bool, n: int, prefix: str, options: SandboxOptions | None = None
) -> tuple[list[float], list[float]]:
    """``create_to_first_command``'s samples (seconds), unsummarized."""
    creates: list[float] = []
    deletes: list[float] = []
    if options is None:
        options = COLD if cold else None
    async with (
        GrpcSandboxFactory(target) as control,
        GrpcSandboxFactory(target, options=options) as factory,
    ):
        for i in range(n + 1):  # the first is a warm-up
            if not cold:
                await wait_pool_full(control)
            start = time.perf_counter()
            sandbox = await factory.create_sandbox(f"{prefix}-{i}")
            _ok(await sandbox.bash("true"), "first command")
            created = time.perf_counter() - start
            start = time.perf_counter()
            await sandbox.delete()
            deleted = time.perf_counter() - start
            if i:
                creates.append(created)
                deletes.append(deleted)
    return creates, deletes


async def create_bursts(
    target: str, *, bursts: int, size: int, prefix: str
) -> tuple[Summary, Summary, list[float]]:
    """Bursts of ``size`` back-to-back default creates (-> first command).

    Before each burst the pool refills to what it aims for; the first burst
    meets the pool at its floor, later ones at the size demand raised it to.
    Returns the first burst, the later bursts, and the deletes.
    """
    first: list[float] = []
    later: list[float] = []
    deletes: list[float] = []
    async with GrpcSandboxFactory(target) as control, GrpcSandboxFactory(target) as factory:
        for burst in range(bursts):
            await wait_pool_full(control)
            made: list[Sandbox] = []
            for i in range(size):
                start = time.perf_counter()
                sandbox = await factory.create_sandbox(f"{prefix}-{burst}-{i}")
                _ok(await sandbox.bash("true"), "first command")
                (first if burst == 0 else later).append(time.perf_counter() - start)
                made.append(sandbox)
            for sandbox in made:
                start = time.perf_counter()
                await sandbox.delete()
                deletes.append(time.perf_counter() - start)
    return summarize(first), summarize(later), deletes


# ---------------------------------------------------------------- throughput


async def throughput(
    sandboxes: list[Sandbox], *, tool: str, args: dict[str, Any], callers: int, seconds: float
) -> dict[str, Any]:
    """Calls/s summed over every sandbox, ``callers`` concurrent loops on each."""
    done = 0
    errors = 0
    deadline = 0.0

    async def loop(sandbox: Sandbox) -> None:
        nonlocal done, errors
        while time.perf_counter() < deadline:
            result = await sandbox.call_tool(tool, args)
            if result.is_error:
                errors += 1
            done += 1

    for sandbox in sandboxes:  # warm every path once
        _ok(await sandbox.call_tool(tool, args), tool)
    start = time.perf_counter()
    deadline = start + seconds
    async with asyncio.TaskGroup() as group:
        for sandbox in sandboxes:
            for _ in range(callers):
                group.create_task(loop(sandbox))
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{errors} {tool} calls failed during the throughput run")
    return {
        "tool": tool,
        "sandboxes": len(sandboxes),
        "callers_per_sandbox": callers,
        "calls": done,
        "seconds": round(elapsed, 3),
        "calls_per_s": round(done / elapsed, 1),
    }


# ---------------------------------------------------------------- memory


def container_memory(container: Container) -> tuple[int, int]:
    """(the cgroup's memory usage, what ``docker stats`` shows: usage minus
    inactive file cache), in bytes."""
    stats = container.stats(stream=False, one_shot=True)
    memory = stats.get("memory_stats") or {}
    usage = int(memory.get("usage") or 0)
    inactive = int((memory.get("stats") or {}).get("inactive_file") or 0)
    return usage, usage - inactive


def container_memory_bytes(container: Container) -> int:
    """What ``docker stats`` shows: usage minus inactive file cache."""
    return container_memory(container)[1]


async def idle_memory(
    target: str, daemon: Daemon, client: docker.DockerClient, namespace: str, *, count: int
) -> tuple[dict[str, Any], list[float]]:
    """Daemon RSS growth and container memory per idle instance; also their deletes.

    Meant for a fresh daemon without a pool: one instance is created and
    deleted first, so lazily loaded code and buffers are in the baseline.
    """
    async with GrpcSandboxFactory(target, options=COLD) as factory:
        warm = await factory.create_sandbox("idle-warmup")
        _ok(await warm.bash("true"), "idle warm-up")
        await warm.write_file(fx.READ_FILE, fx.KIB_TEXT)
        _ok(await warm.read(fx.READ_FILE), "idle warm-up")
        await warm.delete()
        await asyncio.sleep(1.0)
        before = daemon.rss_kib()
        sandboxes = []
        for i in range(count):
            sandbox = await factory.create_sandbox(f"idle-{i}")
            _ok(await sandbox.bash("true"), "idle first command")
            sandboxes.append(sandbox)
        await asyncio.sleep(1.0)
        after = daemon.rss_kib()
        containers = [
            client.containers.get(labels.resource_name(namespace, sandbox.instance_id))
            for sandbox in sandboxes
        ]
        per_container = [container_memory_bytes(c) for c in containers]
        deletes = []
        for sandbox in sandboxes:
            start = time.perf_counter()
            await sandbox.delete()
            deletes.append(time.perf_counter() - start)
    growth_mib = (after - before) / 1024 / count
    return {
        "instances": count,
        "daemon_rss_before_mib": round(before / 1024, 2),
        "daemon_rss_after_mib": round(after / 1024, 2),
        "daemon_rss_growth_per_instance_mib": round(growth_mib, 3),
        "container_memory_mib_median": round(sorted(per_container)[count // 2] / (1 << 20), 2),
        "container_memory_mib_max": round(max(per_container) / (1 << 20), 2),
    }, deletes


# ---------------------------------------------------------------- big files, big trees


async def first_page_of_1gib(sandbox: Sandbox, n: int) -> Summary:
    _ok(
        await sandbox.bash(
            "yes 'the quick brown fox jumps over the lazy dog 0123456789' "
            "| head -c 1073741824 > big.txt",
            timeout=300_000,
        ),
        "making the 1 GiB file",
    )
    try:
        for _ in range(3):
            _ok(await sandbox.read("big.txt"), "read big.txt")
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            _ok(await sandbox.read("big.txt"), "read big.txt")
            samples.append(time.perf_counter() - start)
        return summarize(samples)
    finally:
        await sandbox.bash("rm -f big.txt")


_RG_TIMED = (
    "(cd {root} && s=$(date +%s%N); rg -l '{pattern}' . >/dev/null; "
    "e=$(date +%s%N); echo $(( (e - s) / 1000 )))"
)


async def grep_10k(sandbox: Sandbox, n: int) -> dict[str, Any]:
    """sandboxd's grep vs ``rg -l`` timed inside the container (no exec overhead)."""
    _ok(await sandbox.bash(fx.tree_shell(fx.TREE_10K, 10_000), timeout=600_000), "10k tree")
    args = {"pattern": fx.GREP_PATTERN, "path": fx.TREE_10K}
    for _ in range(2):
        _ok(await sandbox.call_tool("grep", args), "grep 10k")
    command = _RG_TIMED.format(root=fx.TREE_10K, pattern=fx.GREP_PATTERN)
    _ok(await sandbox.bash(command), "timed rg")
    tool: list[float] = []
    rg: list[float] = []
    for _ in range(n):  # alternating, so load from elsewhere hits both alike
        start = time.perf_counter()
        _ok(await sandbox.call_tool("grep", args), "grep 10k")
        tool.append(time.perf_counter() - start)
        result = _ok(await sandbox.bash(command), "timed rg")
        rg.append(int(result.text.split()[0]) / 1e6)
    await sandbox.bash(f"rm -rf {fx.TREE_10K}", timeout=300_000)
    return {"sandboxd_grep": summarize(tool), "rg_in_container": summarize(rg)}

"""Egress (issue 25, item 7): the gateway's speed, against the same done from the host.

- a 100 MB download through the sandbox's HTTP proxy (curl in the sandbox)
  against the same download by curl on the daemon's host, straight to the
  test host: MB/s each and their ratio;
- connection set-up: CONNECT through the proxy to an allowed host until
  "200" (in the sandbox) against a plain TCP connect from the host: p50 of
  each and the difference;
- 8 sandboxes downloading at once while a ninth makes tool calls (read of
  1 KiB): the calls' p50 under that load against their p50 idle; and the
  same calls under the same downloads by curl on the host (no gateway: what
  a gateway costing nothing would leave them) and under 8 sandboxes spinning
  (the CPUs busy, no network); with each download load's MB/s (the bytes the
  test hosts sent).

Test hosts in a network namespace (tests/egress_net.py; needs root), one
daemon resolving their names from a hosts file. One run, ratios of numbers
from that run.

    python -m bench.egress [--quick]        (also part of ``make bench``)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.targets import Target
from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.contract.models import NetworkPolicy, SandboxOptions
from tests.egress_net import ECHO, EgressHosts
from tests.helpers import Daemon

BIG = 100 * 1000 * 1000
#: Sandboxes (or host loops) loading the machine while the ninth makes tool calls.
LOADS = 8
POLICY = NetworkPolicy(mode="allow", allow=("allowed.test",))

#: In the sandbox: n CONNECTs through the proxy, each until its "200"; seconds each.
SETUP = r"""
import json, socket, sys, time
n = int(sys.argv[1]); out = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT allowed.test:7 HTTP/1.1\r\n\r\n")
    got = b""
    while not got.endswith(b"\r\n\r\n"):
        got += s.recv(4096)
    out.append(time.perf_counter() - t)
    s.close()
print(json.dumps(out))
"""


def _curl_host(url: str) -> float:
    started = time.perf_counter()
    subprocess.run(["curl", "-sS", "--noproxy", "*", "-o", "/dev/null", url], check=True)
    return time.perf_counter() - started


def _direct_connects(address: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        with socket.create_connection((address, 7)):
            out.append(time.perf_counter() - started)
    return out


async def _download(box: Sandbox) -> float:
    result = await box.exec(
        "curl -sS -o /dev/null -w '%{time_total}' http://allowed.test/big", timeout_ms=300_000
    )
    if result.exit_code != 0:
        raise RuntimeError(result.stderr.decode())
    return float(result.stdout.decode())


async def _tool_p50(box: Sandbox, seconds: float) -> tuple[float, int]:
    samples: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        await box.call_tool("read", {"file_path": "/workspace/one.txt"})
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000, len(samples)


@dataclass(frozen=True)
class Loaded:
    """Tool calls on the ninth sandbox while a load runs, and what the load moved."""

    p50_ms: float
    calls: int
    #: Bytes from the test hosts to the host per second in the calls' window (0: no downloads).
    mb_s: float


async def _calls_under(caller: Sandbox, hosts: EgressHosts, seconds: float) -> Loaded:
    await asyncio.sleep(2)  # the load is up to speed
    before, started = hosts.received_bytes(), time.perf_counter()
    p50, calls = await _tool_p50(caller, seconds)
    moved = (hosts.received_bytes() - before) / (time.perf_counter() - started)
    return Loaded(round(p50, 3), calls, round(moved / 1e6, 1))


async def _under_gateway_downloads(
    caller: Sandbox, hosts: EgressHosts, boxes: list[Sandbox], seconds: float
) -> Loaded:
    """Eight sandboxes each downloading in a loop through their gateway."""
    downloads = [
        asyncio.create_task(
            b.exec(
                f"timeout {seconds + 4:.0f} sh -c 'while :; do curl -sS -o /dev/null "
                "http://allowed.test/big; done'",
                timeout_ms=600_000,
            )
        )
        for b in boxes
    ]
    try:
        return await _calls_under(caller, hosts, seconds)
    finally:
        await asyncio.gather(*downloads, return_exceptions=True)


async def _under_host_downloads(caller: Sandbox, hosts: EgressHosts, seconds: float) -> Loaded:
    """The same eight download loops by curl on the host, straight to the test host:
    what the calls could reach with a gateway that cost nothing."""
    loop = f"while :; do curl -sS --noproxy '*' -o /dev/null http://{hosts.allowed}/big; done"
    procs = [
        await asyncio.create_subprocess_exec("sh", "-c", loop, start_new_session=True)
        for _ in range(LOADS)
    ]
    try:
        return await _calls_under(caller, hosts, seconds)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def _under_cpu_loops(
    caller: Sandbox, hosts: EgressHosts, boxes: list[Sandbox], seconds: float
) -> Loaded:
    """Eight sandboxes each spinning a shell loop: the cost of eight busy sandboxes, no network."""
    spins = [
        asyncio.create_task(
            b.exec(f"timeout {seconds + 4:.0f} sh -c 'while :; do :; done'", timeout_ms=60_000)
        )
        for b in boxes
    ]
    try:
        return await _calls_under(caller, hosts, seconds)
    finally:
        await asyncio.gather(*spins, return_exceptions=True)


async def measure(target: str, hosts: EgressHosts, quick: bool) -> dict[str, Any]:
    options = SandboxOptions(network=POLICY)
    async with GrpcSandboxFactory(target, options=options) as factory:
        boxes = [await factory.create_sandbox(f"bench-egress-{i}") for i in range(9)]
        try:
            box = boxes[0]
            await box.exec("true")
            await asyncio.sleep(1)  # the gateway started with the sandbox
            # 1. one 100 MB download, proxy vs host.
            url = f"http://{hosts.allowed}/big"
            direct_s = min(_curl_host(url) for _ in range(1 if quick else 3))
            proxied_s = min([await _download(box) for _ in range(1 if quick else 3)])
            # 2. connection set-up.
            n = 50 if quick else 300
            result = await box.exec(["python3", "-c", SETUP, str(n)], timeout_ms=300_000)
            proxied = json.loads(result.stdout)
            direct = _direct_connects(hosts.allowed, n)
            # 3. tool calls on the ninth: idle, then under three loads.
            caller = boxes[8]
            await caller.write_file("one.txt", b"x" * 1024)
            window = 3 if quick else 8
            idle_p50, idle_n = await _tool_p50(caller, window)
            loads = {
                "host": await _under_host_downloads(caller, hosts, window),
                "cpu": await _under_cpu_loops(caller, hosts, boxes[:8], window),
                "gateway": await _under_gateway_downloads(caller, hosts, boxes[:8], window),
            }
        finally:
            for b in boxes:
                await b.delete()
    mb = BIG / 1e6
    return {
        "download_mb_s_proxy": round(mb / proxied_s, 1),
        "download_mb_s_host": round(mb / direct_s, 1),
        "download_ratio": round(direct_s / proxied_s, 3),
        "setup_p50_ms_proxy": round(statistics.median(proxied) * 1000, 3),
        "setup_p50_ms_direct": round(statistics.median(direct) * 1000, 3),
        "setup_overhead_p50_ms": round(
            (statistics.median(proxied) - statistics.median(direct)) * 1000, 3
        ),
        "tool_p50_ms_idle": round(idle_p50, 3),
        "tool_p50_ms_8_downloading": loads["gateway"].p50_ms,
        "tool_p50_ratio": round(loads["gateway"].p50_ms / idle_p50, 3),
        # The reference: the same load with no gateway (a gateway costing nothing).
        "tool_p50_ms_8_host_downloading": loads["host"].p50_ms,
        "tool_p50_ratio_host": round(loads["host"].p50_ms / idle_p50, 3),
        "tool_p50_ms_8_cpu_loops": loads["cpu"].p50_ms,
        "tool_p50_ratio_cpu": round(loads["cpu"].p50_ms / idle_p50, 3),
        "downloads_mb_s_8_through_gateway": loads["gateway"].mb_s,
        "downloads_mb_s_8_from_host": loads["host"].mb_s,
        "samples": {"setup": n, "tool_idle": idle_n}
        | {f"tool_{name}": load.calls for name, load in loads.items()},
    }


def run(quick: bool = False) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-egress-"))
    try:
        site = folder / "site"
        site.mkdir()
        with (site / "big").open("wb") as out:
            out.truncate(BIG)  # sparse zeros: the disk is not what is measured
        with EgressHosts(folder) as hosts:
            hosts.serve(
                [sys.executable, "-m", "http.server", "--bind", hosts.allowed, "80"],
                cwd=site,
                ready_port=80,
            )
            hosts.serve([sys.executable, "-c", ECHO, hosts.allowed, "7"], ready_port=7)
            daemon = Daemon(
                folder / "sandboxd.sock",
                "--namespace", "bench-egress",
                "--pool-size", "0",
                env={"SANDBOXD_EGRESS_HOSTS_FILE": str(hosts.hosts_file)},
                test_disks=False,
            ).start()  # fmt: skip
            try:
                return asyncio.run(measure(daemon.target, hosts, quick))
            finally:
                daemon.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def evaluate(egress: dict[str, Any]) -> list[Target]:
    return [
        Target("100 MB download through the egress proxy", egress["download_mb_s_proxy"], 100.0,
               "MB/s", higher_is_better=True),
        Target("egress CONNECT set-up p50 <= direct connect + 3 ms",
               egress["setup_p50_ms_proxy"], egress["setup_p50_ms_direct"] + 3.0, "ms"),
        Target("tool calls p50 with 8 sandboxes downloading <= 2 x idle",
               egress["tool_p50_ms_8_downloading"], 2.0 * egress["tool_p50_ms_idle"], "ms"),
    ]  # fmt: skip


def render(egress: dict[str, Any]) -> str:
    e = egress
    lines = [
        "Egress (issue 25; one run)",
        f"  100 MB download      proxy {e['download_mb_s_proxy']:7.1f} MB/s   "
        f"host direct {e['download_mb_s_host']:7.1f} MB/s   "
        f"ratio {e['download_ratio']:.2f}",
        f"  connection set-up    proxy {e['setup_p50_ms_proxy']:7.3f} ms p50 "
        f"direct {e['setup_p50_ms_direct']:7.3f} ms   "
        f"overhead {e['setup_overhead_p50_ms']:.3f} ms",
        f"  tool calls (read)    idle {e['tool_p50_ms_idle']:7.3f} ms p50   "
        f"8 downloading {e['tool_p50_ms_8_downloading']:7.3f} ms   "
        f"ratio {e['tool_p50_ratio']:.2f}",
    ]
    if "tool_p50_ms_8_host_downloading" in e:  # results recorded before these were measured
        lines += [
            f"    the same calls   8 host downloads {e['tool_p50_ms_8_host_downloading']:7.3f} ms "
            f"(ratio {e['tool_p50_ratio_host']:.2f})   "
            f"8 CPU loops {e['tool_p50_ms_8_cpu_loops']:7.3f} ms "
            f"(ratio {e['tool_p50_ratio_cpu']:.2f})",
            f"    8 downloads      gateways {e['downloads_mb_s_8_through_gateway']:7.1f} MB/s "
            f"  from the host {e['downloads_mb_s_8_from_host']:7.1f} MB/s",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    egress = run(args.quick)
    print(json.dumps(egress, indent=2))
    print(render(egress))
    for target in evaluate(egress):
        print(target.line())


if __name__ == "__main__":
    main()

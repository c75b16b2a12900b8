"""Egress (issue 25, item 7): the gateway's speed, against the same done from the host.

- a 100 MB download through the sandbox's HTTP proxy (curl in the sandbox)
  against the same download by curl on the daemon's host, straight to the
  test host: MB/s each and their ratio;
- connection set-up: CONNECT through the proxy to an allowed host until
  "200" (in the sandbox) against a plain TCP connect from the host: p50 of
  each and the difference;
- 8 sandboxes downloading at once while a ninth makes tool calls (read of
  1 KiB): the calls' p50 under that load against their p50 idle.

Test hosts in a network namespace (tests/egress_net.py; needs root), one
daemon resolving their names from a hosts file. One run, ratios of numbers
from that run.

    python -m bench.egress [--quick]        (also part of ``make bench``)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.targets import Target
from runtime_client import GrpcSandboxFactory, Sandbox
from sandboxd.contract.models import NetworkPolicy, SandboxOptions
from tests.egress_net import ECHO, EgressHosts
from tests.helpers import Daemon

BIG = 100 * 1000 * 1000
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
            # 3. tool calls on the ninth while eight download.
            caller = boxes[8]
            await caller.write_file("one.txt", b"x" * 1024)
            idle_p50, idle_n = await _tool_p50(caller, 3 if quick else 8)
            downloads = [
                asyncio.create_task(
                    b.exec(
                        "for i in 1 2 3 4 5 6 7 8; do curl -sS -o /dev/null "
                        "http://allowed.test/big; done",
                        timeout_ms=600_000,
                    )
                )
                for b in boxes[:8]
            ]
            await asyncio.sleep(2)
            loaded_p50, loaded_n = await _tool_p50(caller, 3 if quick else 8)
            still = sum(1 for d in downloads if not d.done())
            for d in downloads:
                d.cancel()
            await asyncio.gather(*downloads, return_exceptions=True)
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
        "tool_p50_ms_8_downloading": round(loaded_p50, 3),
        "tool_p50_ratio": round(loaded_p50 / idle_p50, 3),
        "samples": {"setup": n, "tool_idle": idle_n, "tool_loaded": loaded_n},
        "downloads_still_running_at_the_end": still,
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
    return "\n".join(
        [
            "Egress (issue 25; one run)",
            f"  100 MB download      proxy {egress['download_mb_s_proxy']:7.1f} MB/s   "
            f"host direct {egress['download_mb_s_host']:7.1f} MB/s   "
            f"ratio {egress['download_ratio']:.2f}",
            f"  connection set-up    proxy {egress['setup_p50_ms_proxy']:7.3f} ms p50 "
            f"direct {egress['setup_p50_ms_direct']:7.3f} ms   "
            f"overhead {egress['setup_overhead_p50_ms']:.3f} ms",
            f"  tool calls (read)    idle {egress['tool_p50_ms_idle']:7.3f} ms p50   "
            f"8 downloading {egress['tool_p50_ms_8_downloading']:7.3f} ms   "
            f"ratio {egress['tool_p50_ratio']:.2f}",
        ]
    )


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

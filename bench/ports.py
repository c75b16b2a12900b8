"""Ports (issue 26): a small GET and a large body through a forwarded port
and through the HTTP preview, against the same GET made inside the sandbox
(the floor). One daemon with its HTTP listener; python3 -m http.server in
the sandbox, network off.

    python -m bench.ports [--quick]        (also part of ``make bench``)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import sys
import time
from typing import Any

from bench.resources import Resources
from bench.stats import Summary, summarize
from bench.targets import Target
from runtime_client import GrpcSandboxFactory, Sandbox

PORT = 8000
BIG = 100 << 20
TOKEN = f"bench-{secrets.token_hex(16)}"

#: Runs inside the sandbox: n GETs of path, each on a fresh connection (as
#: the clients outside do); prints the seconds of each.
INSIDE = r"""
import http.client, json, sys, time
n, path, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
out = []
for _ in range(n):
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", path)
    r = c.getresponse()
    while r.read(1 << 20):
        pass
    c.close()
    out.append(time.perf_counter() - t)
print(json.dumps(out))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _get(port: int, path: str, headers: str = "") -> int:
    """One HTTP/1.0 GET on a fresh connection; the body's size."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n{headers}\r\n".encode())
    await writer.drain()
    size = 0
    while chunk := await reader.read(1 << 20):
        size += len(chunk)
    writer.close()
    return size


async def _timed(n: int, get: Any) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await get()
        out.append(time.perf_counter() - started)
    return out


def _cpu_s(pid: int) -> float:
    """CPU seconds a process (all its threads) has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Cpu:
    """CPU per GET of the daemon and of this process (the client, and the
    forwarder of a forwarded port): steadier than wall time on a busy host."""

    def __init__(self, daemon_pid: int) -> None:
        self._pid = daemon_pid
        self.per_get: dict[str, list[float]] = {}

    async def timed(self, name: str, n: int, get: Any) -> list[float]:
        daemon, own = _cpu_s(self._pid), time.process_time()
        seconds = await _timed(n, get)
        self.per_get[name] = [
            round((_cpu_s(self._pid) - daemon) / n * 1000, 3),
            round((time.process_time() - own) / n * 1000, 3),
        ]
        return seconds


async def _inside(box: Sandbox, n: int, path: str) -> list[float]:
    result = await box.exec(["python3", "-c", INSIDE, str(n), path, str(PORT)], timeout_ms=600_000)
    return [float(s) for s in json.loads(result.stdout)]


async def measure(res: Resources, n: int = 200, big_n: int = 3) -> dict[str, Any]:
    tokens = res.tmp / "ports-tokens"
    tokens.write_text(f"{TOKEN}\n")
    http_port = _free_port()
    daemon = res.start_daemon(
        "--http", f"127.0.0.1:{http_port}", "--tokens-file", str(tokens), suffix="-ports"
    )
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    async with GrpcSandboxFactory(daemon.target) as factory:
        box = await factory.create_sandbox("ports")
        await box.write_file("site/index.html", b"<h1>hello</h1>\n")
        await box.exec(f"head -c {BIG} /dev/zero > site/big.bin")
        await box.start_process(
            ["python3", "-m", "http.server", "--bind", "127.0.0.1", str(PORT)], cwd="site"
        )
        while not any(p.port == PORT for p in await box.list_ports()):  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        prefix = f"/v1/sandboxes/ports/ports/{PORT}"
        results: dict[str, Any] = {}
        cpu = _Cpu(daemon.pid)
        # The same forward on a transport that opens a stream per connection
        # (OpenPort, as against a daemon without OpenPorts): what sharing saves.
        async with GrpcSandboxFactory(daemon.target) as per_stream_factory:
            per_stream_factory.transport._port_streams.supported = False  # type: ignore[attr-defined]
            per_stream = await per_stream_factory.create_sandbox("ports")  # the same one
            async with box.forward_port(PORT) as forward, per_stream.forward_port(PORT) as single:
                await _timed(10, lambda: _get(forward.port, "/index.html"))  # warm-up
                await _timed(10, lambda: _get(single.port, "/index.html"))
                await _timed(10, lambda: _get(http_port, f"{prefix}/index.html", auth))
                results["small_inside"] = summarize(await _inside(box, n, "/index.html"))
                results["small_forward"] = summarize(
                    await cpu.timed("small_forward", n, lambda: _get(forward.port, "/index.html"))
                )
                results["small_forward_per_stream"] = summarize(
                    await cpu.timed(
                        "small_forward_per_stream", n, lambda: _get(single.port, "/index.html")
                    )
                )
        async with box.forward_port(PORT) as forward:
            results["small_preview"] = summarize(
                await cpu.timed(
                    "small_preview", n, lambda: _get(http_port, f"{prefix}/index.html", auth)
                )
            )
            for name, get in (
                ("inside", None),
                ("forward", lambda: _get(forward.port, "/big.bin")),
                ("preview", lambda: _get(http_port, f"{prefix}/big.bin", auth)),
            ):
                seconds = (
                    await _inside(box, big_n, "/big.bin") if get is None
                    else await cpu.timed(f"big_{name}", big_n, get)
                )  # fmt: skip
                results[f"big_{name}_mb_s"] = round(BIG / (1 << 20) / min(seconds), 1)
        results["cpu_ms"] = cpu.per_get
        await box.delete()
    daemon.stop()
    return results


def evaluate(ports: dict[str, Any]) -> list[Target]:
    floor = ports["small_inside"].p50
    return [
        Target("GET through a forwarded port p50 <= floor + 2 ms",
               ports["small_forward"].p50, floor + 2.0, "ms"),
        Target("GET through the preview p50 <= floor + 2 ms",
               ports["small_preview"].p50, floor + 2.0, "ms"),
        Target("100 MiB through a forwarded port", ports["big_forward_mb_s"], 200.0, "MB/s",
               higher_is_better=True),
        Target("100 MiB through the preview", ports["big_preview_mb_s"], 200.0, "MB/s",
               higher_is_better=True),
    ]  # fmt: skip


def render(ports: dict[str, Any]) -> str:
    cpu = ports.get("cpu_ms") or {}

    def row(name: str, key: str, mb: str | None) -> str:
        summary: Summary = ports[key]
        size = f"{ports[mb]:7.1f}" if mb else " " * 7
        line = f"  {name:<26} {summary.p50:7.2f} / {summary.p95:7.2f}    {size}"
        kind = key.removeprefix("small_")
        if f"small_{kind}" in cpu:
            small = cpu[f"small_{kind}"]
            line += f"    {small[0]:5.2f} / {small[1]:5.2f}"
        if f"big_{kind}" in cpu:
            big = cpu[f"big_{kind}"]
            line += f"    {big[0]:5.0f} / {big[1]:5.0f}"
        return line

    return "\n".join(
        [
            "Ports (small GET ms p50 / p95, fresh connection each; 100 MiB GET MB/s;",
            "CPU ms per small GET and per 100 MiB GET: daemon / client process with its forwarder)",
            row("inside the sandbox (floor)", "small_inside", "big_inside_mb_s"),
            row("through a forwarded port", "small_forward", "big_forward_mb_s"),
            *(
                [row("  a stream per connection", "small_forward_per_stream", None)]
                if "small_forward_per_stream" in ports
                else []
            ),
            row("through the HTTP preview", "small_preview", "big_preview_mb_s"),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ports", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    res = Resources()
    try:
        ports = asyncio.run(measure(res, 30 if args.quick else 200, 1 if args.quick else 3))
    finally:
        res.close()
    print(render(ports))
    for target in evaluate(ports):
        print(target.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Test hosts for egress: a network namespace with addresses the daemon routes to.

One namespace per ``EgressHosts`` (a veth pair to the host's namespace): the
daemon, in the host's namespace, reaches its addresses as it would hosts on
the internet, and a hosts file (the daemon's ``SANDBOXD_EGRESS_HOSTS_FILE``)
names them. Addresses come from TEST-NET-2 (198.51.100.0/24), which the
egress rules treat as public (it is no private, loopback or link-local
range), one free /28 per instance so parallel runs do not collide:

- ``.2``  allowed.test   (what the policies allow)
- ``.3``  denied.test    (what they do not)
- ``.1``  the host's end of the veth: an address of the daemon's host

Needs root (ip netns); everything made is removed on exit.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

BASE = ipaddress.ip_network("198.51.100.0/24")

#: A TCP echo server (``python3 -c ECHO ADDRESS PORT``): what it reads, back.
ECHO = r"""
import socket, sys, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], int(sys.argv[2]))); srv.listen(256)
def serve(c):
    while d := c.recv(65536):
        c.sendall(d)
    c.close()
while True:
    c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def _free_block() -> ipaddress.IPv4Network:
    routes = _run("ip", "-4", "route", "show")
    blocks: list[ipaddress.IPv4Network] = list(BASE.subnets(new_prefix=28))  # type: ignore[arg-type]
    for _ in range(50):
        block = blocks[secrets.randbelow(len(blocks))]
        if str(block.network_address)[:-1] not in routes:
            return block
    raise RuntimeError("no free /28 of 198.51.100.0/24 for test hosts")


class EgressHosts:
    def __init__(self, folder: Path) -> None:
        tag = secrets.token_hex(3)
        self.netns = f"sbxeg-{tag}"
        self._host_if = f"veg{tag}h"
        self._ns_if = f"veg{tag}n"
        block = _free_block()
        hosts = list(block.hosts())
        self.host_address = str(hosts[0])
        self.allowed = str(hosts[1])
        self.denied = str(hosts[2])
        self.block = str(block)
        self.hosts_file = folder / "egress-hosts"
        self._procs: list[subprocess.Popen[bytes]] = []
        self.names = {"allowed.test": self.allowed, "denied.test": self.denied}

    def __enter__(self) -> EgressHosts:
        _run("ip", "netns", "add", self.netns)
        try:
            _run("ip", "link", "add", self._host_if, "type", "veth", "peer", "name", self._ns_if)
            _run("ip", "link", "set", self._ns_if, "netns", self.netns)
            prefix = self.block.split("/")[1]
            _run("ip", "addr", "add", f"{self.host_address}/{prefix}", "dev", self._host_if)
            _run("ip", "link", "set", self._host_if, "up")
            inside = ("ip", "netns", "exec", self.netns)
            for address in (self.allowed, self.denied):
                _run(*inside, "ip", "addr", "add", f"{address}/{prefix}", "dev", self._ns_if)
            _run(*inside, "ip", "link", "set", self._ns_if, "up")
            _run(*inside, "ip", "link", "set", "lo", "up")
            self.write_hosts()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def write_hosts(self, extra: dict[str, str] | None = None) -> None:
        names = {**self.names, **(extra or {})}
        text = "".join(f"{address} {name}\n" for name, address in names.items())
        # Replaced whole (rename), so the daemon never reads half a file.
        tmp = self.hosts_file.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.hosts_file)
        # The resolver re-reads on a changed mtime: make sure it changes.
        stamp = time.time_ns()
        os.utime(self.hosts_file, ns=(stamp, stamp))

    def received_bytes(self) -> int:
        """Bytes the host's namespace has received from the test hosts so far."""
        return int(Path(f"/sys/class/net/{self._host_if}/statistics/rx_bytes").read_text())

    def serve(
        self,
        argv: Sequence[str],
        cwd: Path | None = None,
        ready_port: int = 0,
        address: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Run ``argv`` in the namespace (killed on exit); wait for ``ready_port`` to listen."""
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, *argv],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._procs.append(proc)
        if ready_port:
            target = address or self.allowed
            deadline = time.monotonic() + 20
            while True:
                probe = subprocess.run(
                    ["ip", "netns", "exec", self.netns, "python3", "-c",
                     "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])))",
                     target, str(ready_port)],
                    capture_output=True,
                )  # fmt: skip
                if probe.returncode == 0:
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"test server {argv} did not come up")
                time.sleep(0.1)
        return proc

    def __exit__(self, *_: object) -> None:
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
        subprocess.run(["ip", "link", "del", self._host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)
        with contextlib.suppress(FileNotFoundError):
            self.hosts_file.unlink()


@contextlib.contextmanager
def egress_hosts(folder: Path) -> Iterator[EgressHosts]:
    with EgressHosts(folder) as hosts:
        yield hosts

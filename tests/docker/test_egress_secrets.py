"""Issue 25's Must show for secrets, on a real engine: a secret used by
``curl -H "Authorization: Bearer $TOKEN"`` against an allowed HTTPS test host
arrives there as the real value; ``grep -r`` over the container's files and
``/proc/*/environ`` (as root, through the engine) finds no trace of it, nor do
the engine's record of the container or the daemon's log. A placeholder sent
to a host the secret is not bound to goes out unchanged.

The test hosts live in a network namespace of their own (tests/egress_net.py);
the daemon resolves their names from a hosts file and trusts the test CA that
signed their certificate for upstream TLS (SANDBOXD_EGRESS_UPSTREAM_CA).
Under runc the greps run from the host's root over the container's whole root
and every process (the executor too); under runsc, whose processes and tmpfs
live in gVisor's Sentry, from inside as the workload over every writable
mount. Each grep has a positive control (the same grep finds the placeholder).
Checked with the replacement removed (RequestRewriter's loop over the
replacements commented out): the server logs the placeholder and the first
assertion fails.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import docker
import pytest

from runtime_client.factories import GrpcSandboxFactory
from sandboxd.contract.models import ExecRequest, Runtime, SandboxOptions
from sandboxd.contract.network import NetworkPolicy
from sandboxd.contract.secrets import Secret, placeholder
from tests.egress_net import EgressHosts
from tests.egress_tls import make_test_ca, site_requests
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]

HTTPS_PORT = 8443
HTTP_PORT = 8080

#: The test host: HTTPS and HTTP, logs each request's Authorization header
#: (one JSON line per request) and answers "ok" (never echoing it back into the sandbox).
SERVER = r"""
import http.server, json, ssl, sys, threading
cert, key, log = sys.argv[1], sys.argv[2], sys.argv[3]
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        with open(log, "a") as out:
            out.write(json.dumps({"host": self.headers.get("host"), "path": self.path,
                                  "auth": self.headers.get("authorization"),
                                  "body": body.decode()}) + "\n")
        self.send_response(200); self.send_header("content-length", "3"); self.end_headers()
        self.wfile.write(b"ok\n")
    do_POST = do_GET
    def log_message(self, *args): pass
def serve(port, context):
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); context.load_cert_chain(cert, key)
threading.Thread(target=serve, args=(HTTP_PORT, None), daemon=True).start()
serve(HTTPS_PORT, context)
""".replace("HTTPS_PORT", str(HTTPS_PORT)).replace("HTTP_PORT", str(HTTP_PORT))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, EgressHosts, Path]]:
    folder = tmp_path_factory.mktemp("egress-secrets")
    with EgressHosts(folder) as hosts:
        # other.test: the same server, a name no secret is bound to.
        hosts.write_hosts({"other.test": hosts.denied})
        tls = make_test_ca(folder, ["allowed.test", "other.test"])
        log = folder / "requests.log"
        (folder / "server.py").write_text(SERVER)
        hosts.serve(
            ["python3", str(folder / "server.py"), str(tls.cert), str(tls.key), str(log)],
            ready_port=HTTPS_PORT,
        )  # fmt: skip
        daemon = Daemon(
            folder / "sandboxd.sock",
            "--namespace", f"egsec-{secrets.token_hex(3)}",
            "--pool-size", "0",
            env={
                "SANDBOXD_EGRESS_HOSTS_FILE": str(hosts.hosts_file),
                "SANDBOXD_EGRESS_UPSTREAM_CA": str(tls.ca),
                "SANDBOXD_LOG_LEVEL": "DEBUG",
            },
        ).start()  # fmt: skip
        try:
            yield daemon, hosts, log
        finally:
            daemon.stop()


@pytest.fixture
async def factory(world: tuple[Daemon, EgressHosts, Path]) -> AsyncIterator[GrpcSandboxFactory]:
    async with GrpcSandboxFactory(world[0].target) as made:
        yield made


def _files_holding(client: docker.DockerClient, container: str, pattern: str) -> list[str]:
    """Files of the container (its root, /workspace, /tmp, /run/sandboxd: everything
    mounted in it but /proc and /sys) that hold ``pattern``, grepped from the host.

    From the host because the container's own root has no capabilities: root-only
    folders and other users' files would be unreadable to a grep inside it. The
    pattern goes on stdin, never on a command line.
    """
    pid = client.api.inspect_container(container)["State"]["Pid"]
    root = f"/proc/{pid}/root"
    proc = subprocess.run(
        ["grep", "-rlsF", "-f", "-", root, "--exclude-dir=proc", "--exclude-dir=sys"],
        input=pattern.encode() + b"\n",
        capture_output=True,
        timeout=120,
    )
    return [line.removeprefix(root) for line in proc.stdout.decode().splitlines()]


def _environs_holding(client: docker.DockerClient, container: str, pattern: str) -> list[int]:
    """The container's processes whose environment holds ``pattern`` (every
    ``/proc/<pid>/environ``, read as the host's root: the executor is non-dumpable)."""
    top = client.api.top(container, ps_args="-eo pid")
    assert top["Processes"], "no process found in the container"
    found = []
    for (pid,) in top["Processes"]:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue  # ended since
        if pattern.encode() in environ:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("runtime", [Runtime.RUNC, Runtime.RUNSC])
async def test_secret_arrives_as_the_value_and_the_sandbox_holds_no_trace(
    runtime: Runtime,
    factory: GrpcSandboxFactory,
    world: tuple[Daemon, EgressHosts, Path],
    docker_client: docker.DockerClient,
) -> None:
    daemon, _, log = world
    value = "sbxd-real-" + secrets.token_hex(16)
    instance = f"egsec-{secrets.token_hex(4)}"
    token = placeholder(instance, "TOKEN")
    options = SandboxOptions(
        runtime=runtime,
        network=NetworkPolicy(mode="allow", allow=("allowed.test", "other.test")),
        secrets=(
            Secret("TOKEN", value, ("allowed.test",), env="TOKEN"),
            Secret("FILED", value + "-f", ("allowed.test",), file="/tmp/secrets/filed"),
        ),
    )
    info, _ = await factory.transport.create_sandbox(instance, options)
    try:
        assert value not in repr(info) and all(not s.value for s in info.options.secrets)

        async def sh(command: str) -> str:
            result = await factory.transport.exec(instance, ExecRequest(shell=command))
            assert result.exit_code == 0, (command, result.stdout, result.stderr)
            return result.stdout.decode()

        # The Must show: curl with the placeholder; the test host gets the value.
        code = await sh(
            'curl -sS -o /dev/null -w "%{http_code}" '
            f'-H "Authorization: Bearer $TOKEN" https://allowed.test:{HTTPS_PORT}/must-show'
        )
        assert code == "200"
        # Keep-alive: two requests on one connection, one with a body that holds the placeholder.
        await sh(
            f'curl -sS -o /dev/null -H "Authorization: Bearer $(cat /tmp/secrets/filed)" '
            f'https://allowed.test:{HTTPS_PORT}/a --next -o /dev/null -X POST -d "b=$TOKEN" '
            f'-H "Authorization: Bearer $TOKEN" https://allowed.test:{HTTPS_PORT}/b'
        )
        # Other TLS stacks trust the daemon's CA through the same bundle: Python, wget.
        await sh(
            'python3 -c "import os, urllib.request as u; u.urlopen(u.Request('
            f"'https://allowed.test:{HTTPS_PORT}/python', "
            "headers={'Authorization': 'Bearer ' + os.environ['TOKEN']}))\""
        )
        await sh(
            f'wget -q -O /dev/null --header "Authorization: Bearer $TOKEN" '
            f"https://allowed.test:{HTTPS_PORT}/wget"
        )
        # Plain HTTP to the secret's host: replaced too; to another host: unchanged.
        await sh(
            f'curl -sS -o /dev/null -H "Authorization: $TOKEN" http://allowed.test:{HTTP_PORT}/plain'
        )
        await sh(
            f'curl -sS -o /dev/null -H "Authorization: $TOKEN" http://other.test:{HTTP_PORT}/other'
        )
        seen = {r["path"]: r for r in site_requests(log)}
        assert seen["/must-show"]["auth"] == f"Bearer {value}"
        assert seen["/a"]["auth"] == f"Bearer {value}-f"
        assert seen["/b"]["auth"] == f"Bearer {value}" and seen["/b"]["body"] == f"b={token}"
        assert seen["/python"]["auth"] == seen["/wget"]["auth"] == f"Bearer {value}"
        assert seen["/plain"]["auth"] == value
        assert seen["/other"]["auth"] == token

        # No trace in the sandbox: files and every process's environment.
        container = _container_of(docker_client, instance)
        filed = placeholder(instance, "FILED")
        if runtime == Runtime.RUNC:
            # From the host's root: the whole root, every mount, every process
            # (the executor included). A live workload process with the
            # placeholder in its environment is the positive control.
            running = asyncio.ensure_future(
                factory.transport.exec(instance, ExecRequest(shell="sleep 3"))
            )
            await asyncio.sleep(1)
            assert _environs_holding(docker_client, container, token)
            assert _environs_holding(docker_client, container, value) == []
            await running
            assert "/tmp/secrets/filed" in _files_holding(docker_client, container, filed)
            assert _files_holding(docker_client, container, value) == []
        else:
            # gVisor's processes and tmpfs live in its Sentry, out of the host's
            # /proc: grep from inside, as the workload (what the sandbox can
            # see), every writable mount (the root is read-only: the image
            # cannot have gained a value). The grep's own shell has $TOKEN.
            async def grep(pattern: str, command: str) -> str:
                result = await factory.transport.exec(
                    instance, ExecRequest(shell=command, stdin=pattern.encode() + b"\n")
                )
                return result.stdout.decode()

            assert await grep(token, IN_SANDBOX_ENVIRON)
            assert await grep(value, IN_SANDBOX_ENVIRON) == ""
            assert "/tmp/secrets/filed" in await grep(filed, IN_SANDBOX_FILES)
            assert await grep(value, IN_SANDBOX_FILES) == ""
        attrs = docker_client.api.inspect_container(container)
        assert value not in json.dumps(attrs)
        # Nor the daemon's log (DEBUG), GetSandbox or the reply to create.
        got = await factory.transport.get_sandbox(instance)
        assert value not in repr(got)
        await asyncio.sleep(0.2)
        assert value not in daemon.log.read_text()
    finally:
        await factory.transport.delete_sandbox(instance)


IN_SANDBOX_ENVIRON = (
    "p=$(cat); for f in /proc/[0-9]*/environ; do "
    'tr "\\0" "\\n" < $f 2>/dev/null | grep -qF -- "$p" && echo $f; done; true'
)
IN_SANDBOX_FILES = 'p=$(cat); grep -rlsF -- "$p" /tmp /var/tmp /workspace /run /home; true'


def _container_of(client: docker.DockerClient, instance: str) -> str:
    for container in client.containers.list():
        if instance in container.name:
            return str(container.name)
    raise AssertionError(f"no container for {instance}")


async def test_a_host_whose_certificate_does_not_verify_never_gets_the_value(
    factory: GrpcSandboxFactory, world: tuple[Daemon, EgressHosts, Path]
) -> None:
    """denied.test is the same test server, but its certificate names only
    allowed.test and other.test: the upstream TLS fails verification, so the
    request (and the value) never leaves the daemon and the workload reads why.
    Checked with verification off (``check_hostname = False`` on the upstream
    context): the request arrives with the value and this test fails."""
    _, _, log = world
    value = "sbxd-real-" + secrets.token_hex(16)
    instance = f"egsec-{secrets.token_hex(4)}"
    options = SandboxOptions(
        network=NetworkPolicy(mode="allow", allow=("denied.test",)),
        secrets=(Secret("TOKEN", value, ("denied.test",), env="TOKEN"),),
    )
    await factory.transport.create_sandbox(instance, options)
    try:
        result = await factory.transport.exec(
            instance,
            ExecRequest(
                shell='curl -sS -w "\\n%{http_code}" -H "Authorization: Bearer $TOKEN" '
                f"https://denied.test:{HTTPS_PORT}/wrong-cert"
            ),
        )
        out = result.stdout.decode()
        assert out.endswith("\n502"), (out, result.stderr)
        assert "TLS to denied.test failed: certificate verify failed" in out
        assert value not in out
        assert all(r["path"] != "/wrong-cert" for r in site_requests(log))
    finally:
        await factory.transport.delete_sandbox(instance)

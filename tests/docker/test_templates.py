"""Templates on a real engine: a 3-line Dockerfile built through the daemon
(its log streamed), used by a new sandbox, rebuilt unchanged (a cache hit:
nothing runs), and an image without python3 refused with the reason. The
build had no network (its RUN saw only the loopback). Images made here carry
the namespace's label and are removed after."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import docker
import docker.errors
import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from runtime_client import GrpcSandboxFactory, InvalidArgument, Sandbox, Timeout
from runtime_client.templates import build_template, context_of, template_from_snapshot
from sandboxd.backends.docker.templates import REPOSITORY
from sandboxd.backends.shared import labels
from sandboxd.contract.models import ExecRequest, SandboxOptions
from sandboxd.ctl.app import app as ctl_app
from tests.docker_fixtures import IMAGE, RUN_PREFIX, remove_namespace_resources
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

TOKEN = "templates-token-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


#: The README's example (README.md, "Templates").
DOCKERFILE = f"""FROM {IMAGE}
COPY greet.py /home/sandbox/greet.py
RUN python3 ~/greet.py > ~/greeting && ls /sys/class/net > ~/networks
"""


@pytest.fixture
def namespace(docker_client: docker.DockerClient) -> Iterator[str]:
    name = f"{RUN_PREFIX}-tp{secrets.token_hex(2)}"
    yield name
    remove_namespace_resources(docker_client, name)
    for image in docker_client.images.list(filters={"label": f"{labels.NAMESPACE}={name}"}):
        with contextlib.suppress(docker.errors.APIError):
            docker_client.images.remove(image.id, force=True)


async def test_a_template_is_built_used_cached_and_checked(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "tpl"
    folder.mkdir()
    (folder / "Dockerfile").write_text(DOCKERFILE)
    (folder / "greet.py").write_text("print('hello from the template')\n")
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    port = _free_port()
    args = ("--namespace", namespace, "--image", IMAGE, "--pool-size", "0",
            "--http", f"127.0.0.1:{port}", "--tokens-file", str(tmp_path / "tokens"))  # fmt: skip
    daemon = await anyio.to_thread.run_sync(daemon_factory(tmp_path / "t.sock", *args).start)
    http = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=120,
    )
    ctl = CliRunner(env={"SANDBOXD_TARGET": daemon.target, "SANDBOXD_TOKEN": None})

    def sandboxctl(*argv: str) -> Result:
        result = ctl.invoke(ctl_app, list(argv))
        assert result.exit_code == 0, result.output
        return result

    async with GrpcSandboxFactory(daemon.target) as factory:
        lines: list[str] = []
        built = await build_template(factory.transport, folder, log=lines.append)
        assert not built.cached and built.image.startswith(f"{REPOSITORY}:{namespace}-")
        assert any(line.startswith("Step 3/") and "RUN python3" in line for line in lines)
        image = docker_client.images.get(built.image)
        assert image.labels[labels.NAMESPACE] == namespace

        info, _ = await factory.transport.create_sandbox(
            "from-template", SandboxOptions(image=built.image)
        )
        assert info.options.image == built.image
        result = await factory.transport.exec(
            "from-template", ExecRequest(shell="cat /home/sandbox/greeting /home/sandbox/networks")
        )
        assert result.stdout == b"hello from the template\nlo\n"  # no network in the build

        # A snapshot committed to a template: a new sandbox of it starts with its files.
        box = Sandbox(factory.transport, "from-template")
        await box.write_file("src/app.py", "print('kept')\n")
        await box.snapshot("committed")
        await factory.transport.delete_sandbox("from-template")
        committed = await template_from_snapshot(factory.transport, "committed")
        assert not committed.cached and committed.image != built.image
        await factory.transport.create_sandbox("second", SandboxOptions(image=committed.image))
        second = Sandbox(factory.transport, "second")
        ran = await second.exec("python3 src/app.py && touch src/new && stat -c %U src/app.py")
        assert ran.stdout == b"kept\nsandbox\n", ran.stderr  # the sandbox user's, writable
        await factory.transport.delete_sandbox("second")
        over_http = await http.post("/v1/snapshots/committed/template")
        done = json.loads(over_http.text.splitlines()[-1])["template"]
        assert done["image"] == committed.image and done["cached"]
        by_ctl = await anyio.to_thread.run_sync(
            sandboxctl, "template", "from-snapshot", "committed", "--json"
        )
        made = json.loads(by_ctl.stdout)
        assert made["image"] == committed.image and made["cached"], made
        await factory.transport.delete_snapshot("committed")
        missing = await http.post("/v1/snapshots/committed/template")
        assert missing.status_code == 404, missing.text

        again: list[str] = []
        cached = await build_template(factory.transport, folder, log=again.append)
        assert cached.cached and cached.image == built.image and again == []
        # The same over HTTP: the folder's tar as the body, NDJSON back.
        body = b"".join([piece async for piece in context_of(folder)])
        answer = await http.put("/v1/templates", content=body)
        assert answer.status_code == 200, answer.text
        (line,) = [json.loads(x) for x in answer.text.splitlines()]
        assert line["template"]["image"] == built.image and line["template"]["cached"]

        # sandboxctl: the tag on stdout (a cache hit here), and a new build's log on stderr.
        cached_by_ctl = await anyio.to_thread.run_sync(sandboxctl, "template", "build", str(folder))
        assert cached_by_ctl.stdout == f"{built.image}\n" and "cached" in cached_by_ctl.stderr
        (folder / "Other.Dockerfile").write_text(f"FROM {built.image}\nRUN echo from-sandboxctl\n")
        other = await anyio.to_thread.run_sync(
            sandboxctl, "template", "build", str(folder), "--dockerfile", "Other.Dockerfile"
        )
        assert "Step 2/" in other.stderr and "from-sandboxctl" in other.stderr
        other_image = other.stdout.strip()
        assert other_image.startswith(f"{REPOSITORY}:{namespace}-") and other_image != built.image
        # An image the executor cannot run in: refused, with the reason, and removed.
        (folder / "Dockerfile").write_text(
            f"FROM {IMAGE}\nUSER root\nRUN rm /usr/bin/python3 /usr/bin/python3.*\n"
        )
        with pytest.raises(InvalidArgument, match=r"it has no /usr/bin/python3.*needs python3"):
            await build_template(factory.transport, folder)
        await http.aclose()
        left = docker_client.images.list(filters={"label": f"{labels.NAMESPACE}={namespace}"})
        assert sorted(i.tags[0] for i in left) == sorted(
            [built.image, committed.image, other_image]
        )


async def test_a_build_over_its_time_limit_is_stopped_and_leaves_nothing(
    daemon_factory: type[Daemon], docker_client: docker.DockerClient, namespace: str, tmp_path: Path
) -> None:
    folder = tmp_path / "slow"
    folder.mkdir()
    # A first step that commits an image (new each run: no cache), then one
    # that outlasts the limit.
    (folder / "Dockerfile").write_text(
        f"FROM {IMAGE}\nRUN echo {secrets.token_hex(8)} > /tmp/marker\nRUN sleep 60\n"
    )
    args = ("--namespace", namespace, "--image", IMAGE, "--pool-size", "0")
    env = {"SANDBOXD_TEMPLATE_BUILD_TIMEOUT_S": "3"}
    daemon = await anyio.to_thread.run_sync(
        daemon_factory(tmp_path / "t.sock", *args, env=env).start
    )
    async with GrpcSandboxFactory(daemon.target) as factory:
        lines: list[str] = []
        started = time.monotonic()
        with pytest.raises(Timeout, match=r"time limit of 3 s.*TEMPLATE_BUILD_TIMEOUT_S"):
            await build_template(factory.transport, folder, log=lines.append)
        assert time.monotonic() - started < 30
        assert any("RUN sleep 60" in line for line in lines)
        # What the build made, from its own log: the step containers and the
        # image of its first RUN. None is left, nor a tag.
        containers = [line.split()[-1] for line in lines if "---> Running in" in line]
        images = [line.split()[-1] for line in lines if re.fullmatch(r" ---> [0-9a-f]{12}", line)]
        assert len(containers) == 2 and len(images) == 2  # the base image's, then the first RUN's
        for container in containers:
            with pytest.raises(docker.errors.NotFound):
                docker_client.containers.get(container)
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(images[1])
        docker_client.images.get(images[0])  # the base, untouched
        assert docker_client.images.list(filters={"reference": f"{REPOSITORY}:{namespace}-*"}) == []
        # A caller that goes away mid-build stops it the same way (before the limit).
        (folder / "Dockerfile").write_text(f"FROM {IMAGE}\nRUN sleep 60\n")
        seen: list[str] = []
        running = anyio.Event()

        def note(line: str) -> None:
            if "---> Running in" in line:
                seen.append(line.split()[-1])
                running.set()

        with anyio.move_on_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(
                    functools.partial(build_template, log=note), factory.transport, folder
                )
                await running.wait()
                group.cancel_scope.cancel()
        assert seen, "the build's step container never showed"

        def left() -> list[object]:
            return docker_client.containers.list(all=True, filters={"id": seen})

        for _ in range(100):
            if not left():
                break
            await anyio.sleep(0.1)
        assert left() == []
        # The daemon serves on: a sandbox still starts.
        await factory.transport.create_sandbox("after", SandboxOptions())
        await factory.transport.delete_sandbox("after")

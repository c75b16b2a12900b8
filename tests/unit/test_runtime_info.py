"""How GetStatus describes container runtimes from `docker info`."""

from __future__ import annotations

import pytest

from sandboxd.backends.docker import runtimes
from sandboxd.contract import convert
from sandboxd.contract.models import (
    DiskLimit,
    PoolStatus,
    Runtime,
    RuntimeInfo,
    SandboxOptions,
    ServerStatus,
)
from sandboxd.transports.http.schemas import ServerStatus as HttpServerStatus

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


@pytest.mark.parametrize(
    ("runtime", "pids_limit", "host"),
    [
        (Runtime.RUNC, 512, 512),
        (Runtime.RUNSC, 512, 16_384),  # gVisor's own threads count on the host
        (Runtime.RUNSC, 20_000, 20_000),  # a sandbox that asked for more keeps it
    ],
)
def test_host_pids_limit(runtime: Runtime, pids_limit: int, host: int) -> None:
    options = SandboxOptions(runtime=runtime, pids_limit=pids_limit)
    assert runtimes.host_pids_limit(options, 16_384) == host


@pytest.mark.parametrize(
    ("args", "platform"),
    [
        (["--platform=ptrace", "--network=none"], "ptrace"),
        (["--network=none", "-platform=systrap"], "systrap"),
        (["--platform", "kvm"], "kvm"),
        (["--network=none"], ""),
        (["--platform"], ""),
        ([], ""),
    ],
)
def test_platform_of(args: list[str], platform: str) -> None:
    assert runtimes.platform_of(args) == platform


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("runsc version 0.0~20240729.0\nspec: 1.2.0\n", "0.0~20240729.0"),
        ("runc version 1.1.5+ds1\ncommit: 1.1.5\n", "1.1.5+ds1"),
        ("garbage\n", ""),
        ("", ""),
        ("x version " + "9" * 1000, "9" * runtimes.VERSION_MAX_CHARS),
    ],
)
def test_parse_version(output: str, version: str) -> None:
    assert runtimes.parse_version(output) == version


async def test_describe_lists_every_runtime_options_can_name() -> None:
    asked: list[str] = []

    async def version_of(path: str) -> str:
        asked.append(path)
        return {"runc": "1.1.5", "/opt/runsc": "0.0~20240729.0"}[path]

    engine = {
        "runc": {"path": "runc"},
        "runsc": {"path": "/opt/runsc", "runtimeArgs": ["--platform=ptrace", "--network=none"]},
        "other": {"path": "/bin/other"},
    }
    assert await runtimes.describe(engine, version_of) == [
        RuntimeInfo(name="runc", version="1.1.5", platform="", available=True),
        RuntimeInfo(name="runsc", version="0.0~20240729.0", platform="ptrace", available=True),
    ]
    assert asked == ["runc", "/opt/runsc"]


async def test_describe_without_runsc_says_unavailable() -> None:
    async def version_of(path: str) -> str:
        return "1"

    found = await runtimes.describe({"runc": {"path": "runc"}, "runsc": "junk"}, version_of)
    assert found[1] == RuntimeInfo(name="runsc", available=False)


async def test_binary_version_of_a_missing_binary_is_empty() -> None:
    assert await runtimes.binary_version("/nonexistent/runsc") == ""
    assert await runtimes.binary_version("no-such-runtime-binary") == ""


def test_status_round_trips_through_proto_and_http() -> None:
    status = ServerStatus(
        version="1",
        backend="docker",
        namespace="ns",
        pool=PoolStatus(size=1),
        runtimes=(
            RuntimeInfo(name="runc", version="1.1.5", available=True),
            RuntimeInfo(name="runsc", version="0.0~2024", platform="ptrace", available=True),
        ),
    )
    assert convert.status_from_pb(convert.status_to_pb(status)) == status
    http = HttpServerStatus.from_model(status).model_dump()
    assert http["runtimes"][1] == {
        "name": "runsc",
        "version": "0.0~2024",
        "platform": "ptrace",
        "available": True,
    }


def test_sandboxctl_status_shows_runtimes() -> None:
    from rich.console import Console

    from sandboxd.ctl import render

    status = ServerStatus(
        version="1",
        backend="docker",
        namespace="ns",
        pool=PoolStatus(),
        runtimes=(
            RuntimeInfo(name="runc", version="1.1.5", available=True),
            RuntimeInfo(name="runsc", version="", platform="", available=False),
        ),
    )
    assert render.status_json(status, {})["runtimes"][0] == {
        "name": "runc",
        "version": "1.1.5",
        "platform": "",
        "available": True,
    }
    console = Console(width=120, record=True)
    console.print(render.status_table(status, {}, "unix:///x.sock"))
    text = console.export_text()
    assert "runtime runc" in text and "1.1.5" in text
    assert "runtime runsc" in text and "not registered" in text


def test_sandboxctl_status_shows_whether_the_disk_limit_is_enforced() -> None:
    from rich.console import Console

    from sandboxd.ctl import render

    def shown(disk: DiskLimit) -> str:
        status = ServerStatus(
            version="1", backend="docker", namespace="ns", pool=PoolStatus(), disk=disk
        )
        console = Console(width=160, record=True)
        console.print(render.status_table(status, {}, "unix:///x.sock"))
        assert render.status_json(status, {})["disk"]["enforced"] is disk.enforced
        return console.export_text()

    assert "64 MiB per workspace" in shown(DiskLimit(enforced=True, bytes=64 << 20))
    off = shown(DiskLimit(reason="sandboxd is not root"))
    assert "not enforced" in off and "sandboxd is not root" in off

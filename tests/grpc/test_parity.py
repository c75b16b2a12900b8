"""One script of calls through both factories gives the same results."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_client import (
    Conflict,
    GrpcSandboxFactory,
    LocalSandboxFactory,
    NotFound,
    Sandbox,
    SandboxFactory,
)
from sandboxd.daemon.assembly import Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


async def _script(factory: SandboxFactory) -> list[object]:
    box: Sandbox = await factory.create_sandbox("same", cwd="/workspace/proj")
    seen: list[object] = []
    written = await box.write_file("a/b.txt", "line1\nline2\n")
    seen.append((written.size, written.sha256, written.created))
    seen.append((await box.read_file("a/b.txt", offset=6)).data)
    seen.append([(e.name, e.type, e.size) for e in await box.list_dir("a")])
    seen.append((await box.exec("wc -l < a/b.txt; basename $PWD")).stdout)
    try:
        await box.write_file("a/b.txt", "x", expected_sha256="absent")
    except Conflict as exc:
        seen.append(("conflict", "content changed" in str(exc)))
    try:
        await box.read_file("nope")
    except NotFound as exc:
        seen.append(("not found", str(exc).endswith("nope: no such file or directory")))
    seen.append(await box.remove("a", recursive=True))
    seen.append((await box.exists("a")).exists)
    await box.delete()
    return seen


async def test_grpc_and_local_factories_agree(server: Daemon, tmp_path: Path) -> None:
    async with GrpcSandboxFactory(f"unix://{server.settings.socket}") as remote:
        over_grpc = await _script(remote)
    async with LocalSandboxFactory(tmp_path / "local") as local:
        in_process = await _script(local)
    assert over_grpc == in_process
    assert over_grpc[3] == b"2\nproj\n"

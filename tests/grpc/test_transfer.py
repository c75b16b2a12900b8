"""Streamed transfers and fork on the local backend: through a real daemon
process over gRPC (RSS measured from /proc), and through LocalSandboxFactory."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from runtime_client import GrpcSandboxFactory, LocalSandboxFactory, Sandbox
from runtime_client.errors import ResourceExhausted
from tests import transfer_checks as checks
from tests.helpers import Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.anyio]


@pytest.fixture(scope="module")
def local_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    folder = tmp_path_factory.mktemp("transfer-daemon")
    process = Daemon(
        folder / "sandboxd.sock",
        "--backend", "local",
        "--local-root", str(folder / "root"),
        "--max-payload-bytes", str(1 << 20),
    ).start()  # fmt: skip
    yield process
    process.stop()


@pytest.fixture(params=["grpc", "in-process"])
async def sandbox(
    request: pytest.FixtureRequest, local_daemon: Daemon, tmp_path: Path
) -> AsyncIterator[Sandbox]:
    instance = f"t-{secrets.token_hex(4)}"
    if request.param == "grpc":
        async with GrpcSandboxFactory(local_daemon.target) as factory:
            box = await factory.create_sandbox(instance)
            yield box
            await box.delete()
    else:
        async with LocalSandboxFactory(tmp_path / "local") as local:
            yield await local.create_sandbox(instance)


async def test_200_mib_file_up_and_down_bounded_rss(local_daemon: Daemon) -> None:
    assert local_daemon.proc is not None
    async with GrpcSandboxFactory(local_daemon.target) as factory:
        box = await factory.create_sandbox(f"big-{secrets.token_hex(3)}")
        try:
            await checks.big_file_round_trip(box, local_daemon.proc.pid)
        finally:
            await box.delete()


async def test_cut_stream_leaves_previous_content(sandbox: Sandbox) -> None:
    await checks.cut_stream_keeps_old(sandbox)


async def test_upload_cas(sandbox: Sandbox) -> None:
    await checks.cas(sandbox)


async def test_upload_from_local_file_and_download_to_file(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    source = tmp_path / "in.bin"
    source.write_bytes(bytes(range(256)) * 20_000)
    result = await sandbox.upload("files/in.bin", source, mode=0o640)
    seen: list[int] = []
    done = await sandbox.download("files/in.bin", tmp_path / "out.bin", progress=seen.append)
    assert (tmp_path / "out.bin").read_bytes() == source.read_bytes()
    assert done.sha256 == result.sha256 and sum(seen) == done.size
    assert (await sandbox.stat("files/in.bin")).mode == 0o640
    ranged = b"".join(
        [p async for p in sandbox.download_iter("files/in.bin", offset=10, length=5)
         if isinstance(p, bytes)]
    )  # fmt: skip
    assert ranged == source.read_bytes()[10:15]


async def test_oversized_write_names_the_streaming_call(local_daemon: Daemon) -> None:
    async with GrpcSandboxFactory(local_daemon.target) as factory:
        box = await factory.create_sandbox(f"big-{secrets.token_hex(3)}")
        try:
            with pytest.raises(ResourceExhausted, match="streaming Upload"):
                await box.write_file("x", b"x" * (2 << 20))
        finally:
            await box.delete()


@pytest.mark.parametrize("kind", sorted(checks.HOSTILE))
async def test_hostile_tar_refused(sandbox: Sandbox, kind: str) -> None:
    await checks.hostile_tar(sandbox, kind)


async def test_links_resolving_outside_are_left_out_of_an_upload(sandbox: Sandbox) -> None:
    await checks.links_out_left_out(sandbox)


async def test_links_resolving_outside_are_left_out_of_a_download(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    await checks.links_out_not_downloaded(sandbox, tmp_path)


async def test_symlink_planted_by_the_workload_is_not_followed(sandbox: Sandbox) -> None:
    await checks.symlink_planted_by_the_workload(sandbox)


async def test_10000_file_tree_round_trip(local_daemon: Daemon, tmp_path: Path) -> None:
    async with GrpcSandboxFactory(local_daemon.target) as factory:
        box = await factory.create_sandbox(f"tree-{secrets.token_hex(3)}")
        try:
            await checks.tree_round_trip(box, tmp_path)
        finally:
            await box.delete()


async def test_tree_round_trip_in_process(tmp_path: Path) -> None:
    async with LocalSandboxFactory(tmp_path / "local") as local:
        box = await local.create_sandbox("tree")
        await checks.tree_round_trip(box, tmp_path, files=500)


async def test_gitignore_aware_download(sandbox: Sandbox, tmp_path: Path) -> None:
    await checks.gitignore_download(sandbox, tmp_path)


async def test_fork_then_diverge(sandbox: Sandbox) -> None:
    forked = await checks.fork_then_diverge(sandbox, f"{sandbox.instance_id}-fork")
    await forked.delete()


async def test_fork_errors(sandbox: Sandbox) -> None:
    other = f"{sandbox.instance_id}-other"
    await checks.fork_then_diverge(sandbox, other)
    await checks.fork_errors(sandbox, other, f"missing-{secrets.token_hex(3)}")
    await Sandbox(sandbox._transport, other).delete()

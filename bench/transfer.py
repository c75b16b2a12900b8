"""Moving work in and out (issue 11), side by side with ``docker cp``.

    python -m bench.transfer          # this section alone (~2-4 min)
    python -m bench.run               # the full bench includes it

* a 10,000-file / 100 MB tree: sandboxd UploadTree vs ``docker cp`` into a
  container of the same image (its /workspace on the same kind of volume as
  sandboxd's: an ext4 disk image of the same size when the daemon gives
  workspaces disks, as it does by default; a plain volume otherwise);
  DownloadTree vs ``docker cp`` out; rounds interleaved, the first subject
  alternating, host folders removed only after the last round;
* ForkSandbox of a 100 MB workspace (p50); CreateSnapshot and RestoreSnapshot
  of it (p50, bench.snapshots);
* a 1 GiB single-file Upload, in MB/s.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import docker

from bench import snapshots
from runtime_client import GrpcSandboxFactory
from sandboxd.backends.docker import disk
from sandboxd.contract.errors import SandboxUnavailable

TREE_FILES = 10_000
TREE_BYTES = 100 * 10**6
BIG_FILE = 1 << 30
MiB = 1 << 20


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_tree(root: Path) -> None:
    """10,000 files of 10 kB over 100 folders (100 MB), a few symlinks."""
    body = os.urandom(TREE_BYTES // TREE_FILES)
    for i in range(TREE_FILES):
        folder = root / f"d{i % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.bin").write_bytes(body[i % 7 :] + body[: i % 7])
    (root / "link").symlink_to("d00")


async def _docker_cp(source: str, dest: str) -> None:
    await asyncio.to_thread(
        subprocess.run, ["docker", "cp", source, dest], check=True, capture_output=True
    )


#: The downloads' own filesystem: 3 rounds x 2 subjects x 100 MB, with room.
DEST_BYTES = 2 << 30


def _mount_destination(scratch: Path) -> tuple[Path, Path | None]:
    """A fresh ext4 (with a journal, like most hosts' disks) mounted for both
    subjects' downloads, or the scratch folder where loop devices are not
    available. Measured here: on the host's journal-less ext4, creating files
    within minutes of anyone's mass delete skips the recently deleted inodes
    one by one, so every round's time depended on what other processes had
    just removed (the same run's rounds ranged 1-6 s)."""
    folder = scratch / "downloads"
    folder.mkdir()
    try:
        image, device = disk.create(scratch / "disks", "downloads", DEST_BYTES, uid=os.getuid())
    except SandboxUnavailable as exc:
        log(f"  downloads on the host's disk ({exc})")
        return folder, None
    try:
        subprocess.run(["mount", device, str(folder)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        disk.remove(image)
        log(f"  downloads on the host's disk (mount: {exc})")
        return folder, None
    return folder, image


def _unmount_destination(folder: Path, image: Path | None) -> None:
    if image is not None:
        subprocess.run(["umount", str(folder)], check=False, capture_output=True)
        disk.remove(image)
    shutil.rmtree(folder, ignore_errors=True)


async def _gib() -> AsyncIterator[bytes]:
    block = os.urandom(MiB)
    for _ in range(BIG_FILE // MiB):
        yield block


async def measure(
    target: str,
    client: docker.DockerClient,
    labels: dict[str, str],
    image: str,
    scratch: Path,
    rounds: int = 3,
    forks: int = 5,
) -> dict[str, Any]:
    tree = scratch / "tree"
    log(f"transfer: laying out {TREE_FILES} files / {TREE_BYTES // 10**6} MB")
    await asyncio.to_thread(make_tree, tree)
    async with GrpcSandboxFactory(target) as factory:
        disk_limit = (await factory.transport.get_status()).disk
    peer_image: Path | None = None
    if disk_limit.enforced:
        peer_image, device = await asyncio.to_thread(
            disk.create, scratch / "disks", "peer", disk_limit.bytes
        )
        volume = client.volumes.create(
            labels=labels, driver="local", driver_opts={"type": "ext4", "device": device}
        )
    else:
        volume = client.volumes.create(labels=labels)
    peer = client.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        labels=labels,
        user="1000:1000",
        network_mode="none",
        volumes={volume.name: {"bind": "/workspace", "mode": "rw"}},
    )
    results: dict[str, Any] = {
        "volumes": f"ext4 disk images of {disk_limit.bytes >> 20} MiB (sandboxd and docker cp peer)"
        if disk_limit.enforced
        else "plain Docker volumes (sandboxd and docker cp peer)"
    }
    dest, dest_image = await asyncio.to_thread(_mount_destination, scratch)
    results["downloads"] = (
        f"a fresh ext4 of {DEST_BYTES >> 20} MiB with a journal (both subjects)"
        if dest_image is not None
        else "the host's disk (both subjects)"
    )
    try:
        async with GrpcSandboxFactory(target) as factory:
            box = await factory.create_sandbox("transfer")
            up: list[float] = []
            cp_up: list[float] = []
            down: list[float] = []
            cp_down: list[float] = []
            for n in range(rounds):
                # Interleaved, the first subject alternating, into fresh folders,
                # so load drifts hit both alike. Nothing is deleted until every
                # round is done: on an ext4 without a journal (this host's) the
                # first extraction after a mass delete skips the recently
                # deleted inodes one by one (seconds per 10,000 files), so
                # removing round N's folders made whoever went first in round
                # N+1 pay for both subjects' deletes.
                ups: list[tuple[list[float], Callable[[], Awaitable[Any]]]] = [
                    (up, partial(box.upload_tree, tree, f"up{n}")),
                    (cp_up, partial(_docker_cp, f"{tree}/.", f"{peer.id}:/workspace/up{n}")),
                ]
                downs: list[tuple[list[float], Callable[[], Awaitable[Any]]]] = [
                    (down, partial(box.download_tree, f"up{n}", dest / f"down{n}")),
                    (
                        cp_down,
                        partial(_docker_cp, f"{peer.id}:/workspace/up{n}", f"{dest}/cp{n}"),
                    ),
                ]
                if n % 2:
                    ups.reverse()
                    downs.reverse()
                for times, step in [*ups, *downs]:
                    started = time.perf_counter()
                    await step()
                    times.append(time.perf_counter() - started)
                log(
                    f"  tree round {n} ({'docker cp' if n % 2 else 'sandboxd'} first): "
                    f"up {up[-1]:.2f} s vs docker cp {cp_up[-1]:.2f} s; "
                    f"down {down[-1]:.2f} s vs docker cp {cp_down[-1]:.2f} s"
                )
            await asyncio.to_thread(_unmount_destination, dest, dest_image)
            dest_image = None
            for n in range(1, rounds):  # the fork below measures a 100 MB workspace
                await box.remove(f"up{n}", recursive=True)
            results["tree_rounds_s"] = {
                "upload": up, "upload_docker_cp": cp_up,
                "download": down, "download_docker_cp": cp_down,
            }  # fmt: skip
            results["tree_upload_s"] = statistics.median(up)
            results["tree_upload_docker_cp_s"] = statistics.median(cp_up)
            results["tree_download_s"] = statistics.median(down)
            results["tree_download_docker_cp_s"] = statistics.median(cp_down)

            fork_ms: list[float] = []
            methods: set[str] = set()
            for n in range(forks):
                forked = await box.fork(f"transfer-fork-{n}")
                assert forked.fork_result is not None
                fork_ms.append(forked.fork_result.duration_ms)
                methods.add(forked.fork_result.method)
                await forked.delete()
            results["fork_100mb_ms_p50"] = statistics.median(fork_ms)
            results["fork_ms"] = fork_ms
            results["fork_method"] = ",".join(sorted(methods))
            log(f"  fork of 100 MB: p50 {results['fork_100mb_ms_p50']:.0f} ms ({methods})")

            results["snapshots"] = await snapshots.measure_on(box, factory)
            log(snapshots.render(results["snapshots"]))

            speeds = []
            for _ in range(2):
                started = time.perf_counter()
                await box.upload("big.bin", _gib())
                speeds.append(BIG_FILE / 1e6 / (time.perf_counter() - started))
            results["upload_1gib_mb_s"] = max(speeds)
            results["upload_1gib_mb_s_runs"] = speeds
            log(f"  1 GiB upload: {results['upload_1gib_mb_s']:.0f} MB/s")
            started = time.perf_counter()
            async for _part in box.download_iter("big.bin"):
                pass
            results["download_1gib_mb_s"] = BIG_FILE / 1e6 / (time.perf_counter() - started)
            log(f"  1 GiB download: {results['download_1gib_mb_s']:.0f} MB/s")
            await box.delete()
    finally:
        await asyncio.to_thread(_unmount_destination, dest, dest_image)
        peer.remove(force=True)
        volume.remove(force=True)
        if peer_image is not None:
            await asyncio.to_thread(disk.remove, peer_image)
        await asyncio.to_thread(shutil.rmtree, tree, True)
    results["tree_upload_ratio"] = results["tree_upload_s"] / results["tree_upload_docker_cp_s"]
    results["tree_download_ratio"] = (
        results["tree_download_s"] / results["tree_download_docker_cp_s"]
    )
    return results


def targets(transfer: dict[str, Any]) -> list[tuple[str, float, float, str, bool]]:
    """(name, value, limit, unit, higher_is_better)."""
    return [
        ("tree upload (10k files, 100 MB) <= 1.2 x docker cp", transfer["tree_upload_ratio"],
         1.2, "x", False),
        ("tree download (10k files, 100 MB) <= 1.2 x docker cp",
         transfer["tree_download_ratio"], 1.2, "x", False),
        ("fork of a 100 MB workspace p50 <= 1 s", transfer["fork_100mb_ms_p50"], 1000.0, "ms",
         False),
        ("1 GiB single-file upload >= 200 MB/s", transfer["upload_1gib_mb_s"], 200.0, "MB/s",
         True),
        *(snapshots.targets(transfer["snapshots"]) if "snapshots" in transfer else []),
    ]  # fmt: skip


def render(transfer: dict[str, Any]) -> str:
    t = transfer
    return "\n".join(
        [
            "Moving files in and out (s, median of rounds; ratio = sandboxd / docker cp)",
            f"  tree upload    sandboxd {t['tree_upload_s']:.2f}  docker cp "
            f"{t['tree_upload_docker_cp_s']:.2f}  ratio {t['tree_upload_ratio']:.2f}",
            f"  tree download  sandboxd {t['tree_download_s']:.2f}  docker cp "
            f"{t['tree_download_docker_cp_s']:.2f}  ratio {t['tree_download_ratio']:.2f}",
            f"  fork 100 MB    p50 {t['fork_100mb_ms_p50']:.0f} ms ({t['fork_method']})",
            *([snapshots.render(t["snapshots"])] if "snapshots" in t else []),
            f"  1 GiB upload   {t['upload_1gib_mb_s']:.0f} MB/s; download "
            f"{t['download_1gib_mb_s']:.0f} MB/s",
            f"  volumes        {t.get('volumes', '?')}",
            f"  downloads to   {t.get('downloads', '?')}",
        ]
    )


def main() -> int:
    import json

    from bench.resources import IMAGE, Resources, interrupt_on_sigterm

    interrupt_on_sigterm()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    res = Resources()
    started = time.monotonic()
    try:
        daemon = res.start_daemon()
        image = os.environ.get("SANDBOXD_IMAGE", IMAGE)
        transfer = asyncio.run(measure(daemon.target, res.docker, dict(res.labels), image, res.tmp))
    finally:
        res.close()
    verdicts = []
    for name, value, limit, unit, higher in targets(transfer):
        passed = value >= limit if higher else value <= limit
        verdicts.append({"name": name, "value": value, "limit": limit, "unit": unit,
                         "passed": passed})  # fmt: skip
        op = ">=" if higher else "<="
        print(f"{'PASS' if passed else 'MISS'}  {name}: {value:.4g} {op} {limit:.4g} {unit}")
    print(render(transfer))
    meta = {
        "started": stamp,
        "seconds": round(time.monotonic() - started, 1),
        "loadavg_at_end": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    path = Path(__file__).resolve().parent / "results" / f"transfer-{stamp}.json"
    path.write_text(json.dumps({"meta": meta, "transfer": transfer, "targets": verdicts}, indent=2))
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Transfer and fork checks shared by the local (grpc tier) and Docker tiers.

Each takes a ``Sandbox`` (and what it needs besides) and asserts the
behaviour the issue asks for; the tier modules run them on their backend.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from runtime_client import Sandbox
from runtime_client.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from sandboxd.contract.models import FORK_METHODS, DownloadDone

MiB = 1 << 20


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def pattern(size: int, block: int = 3 * MiB + 17) -> AsyncIterator[bytes]:
    """Deterministic, incompressible-enough bytes in odd-sized blocks."""
    seed = hashlib.sha256(b"seed").digest() * (block // 32 + 1)
    sent, n = 0, 0
    while sent < size:
        piece = bytes([n % 251]) + seed[: min(block, size - sent) - 1]
        n += 1
        sent += len(piece)
        yield piece


async def digest_of(size: int) -> str:
    digest = hashlib.sha256()
    async for piece in pattern(size):
        digest.update(piece)
    return digest.hexdigest()


async def big_file_round_trip(sandbox: Sandbox, pid: int, size: int = 200 * MiB) -> None:
    """Up and down with the hash checked, and the daemon's memory bounded: after
    a warm-up transfer (allocator arenas, gRPC windows), moving 200 MiB more
    grows its RSS by a small fraction of that (WINDOW chunks in flight)."""
    await sandbox.upload("big/warm.bin", pattern(32 * MiB))
    async for _ in sandbox.download_iter("big/warm.bin"):
        pass
    await sandbox.remove("big/warm.bin")
    before = rss_bytes(pid)
    peak = before
    result = await sandbox.upload("big/data.bin", pattern(size))
    peak = max(peak, rss_bytes(pid))
    expected = await digest_of(size)
    assert result.size == size
    assert result.sha256 == expected
    digest = hashlib.sha256()
    done: DownloadDone | None = None
    received = 0
    async for part in sandbox.download_iter("big/data.bin"):
        if isinstance(part, DownloadDone):
            done = part
        else:
            digest.update(part)
            received += len(part)
            if received % (32 * MiB) < MiB:
                peak = max(peak, rss_bytes(pid))
    assert done is not None and done.size == size == received
    assert done.sha256 == expected == digest.hexdigest()
    growth = peak - before
    print(f"daemon RSS: {before / MiB:.0f} MiB before, peak growth {growth / MiB:.1f} MiB")
    assert growth < 40 * MiB, f"daemon RSS grew {growth / MiB:.0f} MiB for {size // MiB} MiB"


async def cut_stream_keeps_old(sandbox: Sandbox) -> None:
    await sandbox.write_file("cut/file.txt", b"the previous content")

    async def broken() -> AsyncIterator[bytes]:
        yield b"x" * (3 * MiB)
        yield b"y" * MiB
        raise RuntimeError("the client died mid-stream")

    with pytest.raises(RuntimeError, match="client died"):
        await sandbox.upload("cut/file.txt", broken())
    assert (await sandbox.read_file("cut/file.txt")).data == b"the previous content"
    # The daemon aborts the session as the stream breaks: the temp file goes.
    for _ in range(100):
        names = [entry.name for entry in await sandbox.list_dir("cut")]
        if names == ["file.txt"]:
            break
        await anyio.sleep(0.1)
    assert names == ["file.txt"], names


async def cas(sandbox: Sandbox) -> None:
    first = await sandbox.upload("cas.txt", b"one", expected_sha256="absent")
    assert first.created
    with pytest.raises(Conflict, match="content changed"):
        await sandbox.upload("cas.txt", b"two", expected_sha256="absent")
    with pytest.raises(Conflict):
        await sandbox.upload("cas.txt", b"two", expected_sha256="0" * 64)
    second = await sandbox.upload("cas.txt", b"two", expected_sha256=first.sha256)
    assert not second.created
    assert (await sandbox.read_file("cas.txt")).data == b"two"
    with pytest.raises(InvalidArgument, match="expected_sha256"):
        await sandbox.upload("cas.txt", b"x", expected_sha256="nope")
    with pytest.raises(NotFound, match="create_parents"):
        await sandbox.upload("no/such/dir/f", b"x", create_parents=False)


def tar_members(*members: tuple[str, str, str]) -> bytes:
    """(name, kind, arg) members: kind file|symlink|hardlink|dir|fifo|chr."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind, arg in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(arg)
                tar.addfile(info, io.BytesIO(arg.encode()))
                continue
            if kind == "dir":
                info.mode = 0o755
            info.type = {
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "dir": tarfile.DIRTYPE,
                "fifo": tarfile.FIFOTYPE,
                "chr": tarfile.CHRTYPE,
            }[kind]
            info.linkname = arg
            tar.addfile(info)
    return buffer.getvalue()


HOSTILE = {
    "dotdot": (tar_members(("../outside.txt", "file", "x")), "'..'"),
    "nested_dotdot": (tar_members(("a/../../outside.txt", "file", "x")), "'..'"),
    "absolute": (tar_members(("/tmp/outside.txt", "file", "x")), "absolute"),
    "symlink_then_write": (
        tar_members(("inside", "symlink", "."), ("inside/../../outside.txt", "file", "x")),
        "'..'",
    ),
    "hardlink_out": (tar_members(("hl", "hardlink", "../outside.txt")), "'..'"),
    "hardlink_absolute": (tar_members(("hl", "hardlink", "/etc/passwd")), "absolute"),
    "fifo": (tar_members(("pipe", "fifo", "")), "FIFOs"),
    "device": (tar_members(("dev", "chr", "")), "devices"),
}


async def hostile_tar(sandbox: Sandbox, kind: str) -> None:
    data, words = HOSTILE[kind]
    await sandbox.make_dir("jail/target", parents=True)
    with pytest.raises(InvalidArgument, match="tar entry") as raised:
        await sandbox.upload_tree(data, "jail/target")
    assert words in str(raised.value)
    # Nothing written outside the target (and nothing special inside it).
    assert [e.name for e in await sandbox.list_dir("jail")] == ["target"]
    assert not (await sandbox.exists("/tmp/outside.txt")).exists
    for entry in await sandbox.list_dir("jail/target"):
        assert entry.type.value in ("file", "directory", "symlink")


#: Symlinks that would resolve outside the target: left out and listed, the
#: rest of the tree extracted (issue 23, items 3 and 13).
LINKS_OUT = tar_members(
    ("sub", "dir", ""),
    ("sub/up", "symlink", ".."),
    ("docs", "symlink", "sub/up/sub/up/../../.."),
    ("venv/bin/python", "symlink", "/usr/bin/python3"),
    ("out", "symlink", "../../.."),
    ("venv/bin/python3", "symlink", "python"),
    ("readme", "file", "hi"),
)
LINKS_LEFT_OUT = {
    "docs": "it leads through the symlink sub/up",
    "venv/bin/python": "it points to an absolute path",
    "out": "it points out of the target",
}


async def links_out_left_out(sandbox: Sandbox) -> None:
    await sandbox.make_dir("jail/target", parents=True)
    result = await sandbox.upload_tree(LINKS_OUT, "jail/target")
    assert {link.path: link.reason for link in result.skipped_links} == LINKS_LEFT_OUT
    assert result.links_skipped == 3 and result.symlinks == 2 and result.files == 1
    kinds = {e.name: e.type.value for e in await sandbox.list_dir("jail/target")}
    assert kinds == {"sub": "directory", "venv": "directory", "readme": "file"}
    assert [e.name for e in await sandbox.list_dir("jail/target/sub")] == ["up"]


async def links_out_not_downloaded(sandbox: Sandbox, tmp_path: Path) -> None:
    """The same tree made in the sandbox, downloaded: the host copy holds no
    link that resolves outside it, and the rest is copied."""
    await sandbox.exec(
        "mkdir -p tree/sub tree/venv/bin && cd tree && ln -s .. sub/up && "
        "ln -s sub/up/sub/up/../../.. docs && ln -s /usr/bin/python3 venv/bin/python && "
        "ln -s ../../.. out && ln -s python venv/bin/python3 && echo hi > readme"
    )
    dest = tmp_path / "copy"
    done = await sandbox.download_tree("tree", dest)
    assert {link.path: link.reason for link in done.skipped_links} == LINKS_LEFT_OUT
    assert done.links_skipped == 3
    assert (dest / "readme").read_text() == "hi\n"
    assert os.readlink(dest / "sub" / "up") == ".."
    assert not (dest / "docs").exists() and not (dest / "docs").is_symlink()
    assert await anyio.to_thread.run_sync(links_leaving, dest) == []


def links_leaving(root: Path) -> list[str]:
    """The symlinks below ``root`` that resolve, through anything, outside it."""
    real = os.path.realpath(root)
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_symlink() and os.path.commonpath([real, os.path.realpath(path)]) != real
    ]


def make_tree(root: Path, files: int, size: int = 0) -> None:
    """``files`` files over 100 folders, some executable, some symlinks."""
    for i in range(files):
        folder = root / f"d{i % 100:02d}" / f"s{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"f{i}.txt"
        if i % 50 == 7:
            os.symlink(f"f{i - 1}.txt", path)
            continue
        body = (f"file {i}\n" * (1 + size // 8))[: max(size, 8)] if size else f"file {i}\n"
        path.write_text(body)
        if i % 10 == 3:
            path.chmod(0o755)
        elif i % 10 == 4:
            path.chmod(0o600)
    (root / "top-link").symlink_to("d00")


def describe(root: Path) -> dict[str, tuple[str, int, str]]:
    found: dict[str, tuple[str, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", stat.S_IMODE(info.st_mode), "")
            else:
                body = hashlib.sha256(path.read_bytes()).hexdigest()
                found[rel] = ("file", stat.S_IMODE(info.st_mode), body)
    return found


async def tree_round_trip(sandbox: Sandbox, tmp_path: Path, files: int = 10_000) -> None:
    source = tmp_path / "src"
    make_tree(source, files)
    result = await sandbox.upload_tree(source, "trees/up")
    assert result.files + result.symlinks == files + 1  # and top-link
    back = tmp_path / "back"
    done = await sandbox.download_tree("trees/up", back)
    assert done.entries == len(describe(source))
    assert describe(back) == describe(source)


async def gitignore_download(sandbox: Sandbox, tmp_path: Path) -> None:
    await sandbox.write_file("repo/.gitignore", "build/\n*.log\n")
    await sandbox.write_file("repo/src/main.py", "print(1)\n")
    await sandbox.write_file("repo/build/out.o", "obj")
    await sandbox.write_file("repo/run.log", "log")
    await sandbox.download_tree("repo", tmp_path / "all")
    await sandbox.download_tree("repo", tmp_path / "clean", gitignore=True)
    assert (tmp_path / "all/build/out.o").exists()
    assert sorted(describe(tmp_path / "clean")) == [".gitignore", "src", "src/main.py"]


async def fork_then_diverge(sandbox: Sandbox, new_id: str) -> Sandbox:
    await sandbox.write_file("shared.txt", "before the fork")
    await sandbox.write_file("deep/nested/file.txt", "nested")
    assert not (await sandbox.read("shared.txt")).is_error  # the source's read state
    forked = await sandbox.fork(new_id)
    assert forked.fork_result is not None
    assert forked.fork_result.method in FORK_METHODS
    assert (await forked.read_file("shared.txt")).data == b"before the fork"
    assert (await forked.read_file("deep/nested/file.txt")).data == b"nested"
    await sandbox.write_file("shared.txt", "source after")
    await forked.write_file("shared.txt", "fork after")
    await forked.write_file("only-in-fork.txt", "x")
    assert (await sandbox.read_file("shared.txt")).data == b"source after"
    assert (await forked.read_file("shared.txt")).data == b"fork after"
    assert not (await sandbox.exists("only-in-fork.txt")).exists
    # The fork's read state starts empty: write without a read is refused.
    result = await forked.write("shared.txt", "overwrite")
    assert result.is_error and "read" in result.text.lower()
    return forked


async def fork_errors(sandbox: Sandbox, other_id: str, missing_id: str) -> None:
    with pytest.raises(NotFound):
        await Sandbox(sandbox._transport, missing_id).fork(f"{missing_id}-x")
    with pytest.raises(AlreadyExists):
        await sandbox.fork(other_id)
    with pytest.raises(InvalidArgument):
        await sandbox.fork("bad id!")
    with pytest.raises(InvalidArgument):
        await sandbox.fork(sandbox.instance_id)


async def symlink_planted_by_the_workload(sandbox: Sandbox) -> None:
    """The workload put a symlink where the tar has a folder: extraction must
    not follow it out of the target (here: into a sibling folder)."""
    await sandbox.make_dir("race/outside", parents=True)
    await sandbox.make_dir("race/target", parents=True)
    planted = await sandbox.exec(["ln", "-s", "../outside", "sub"], cwd="race/target")
    assert planted.exit_code == 0, planted.stderr
    with pytest.raises(InvalidArgument, match=r"'sub/x\.txt'.*not a folder"):
        await sandbox.upload_tree(tar_members(("sub/x.txt", "file", "escaped")), "race/target")
    assert await sandbox.list_dir("race/outside") == []

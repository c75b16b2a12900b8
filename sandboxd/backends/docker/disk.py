"""Per-workspace disk limits: each volume is its own small ext4 filesystem.

A named volume of Docker's local driver lives on the host's disk with no
quota (ext4 here has no project quotas), so one sandbox could fill it for
all. With ``SANDBOXD_DISK_BYTES`` set, a workspace's volume is instead a
sparse image file formatted ext4 and attached to a loop device, mounted by
Docker as ``type=ext4``: writes stop with ENOSPC at the limit. Needs root
(losetup) on the host that runs sandboxd; ``probe`` tries the whole chain
once at start, so a host without it is known (and said) before any create.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandboxd.backends.shared import clone, sparse
from sandboxd.contract.errors import ResourceExhausted, SandboxUnavailable

#: Label on the volume naming its image file, so deletion finds it again.
DISK_LABEL = "sandboxd.disk"


def _run(*argv: str, timeout: float = 60) -> str:
    try:
        done = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise SandboxUnavailable(f"disk limits need {argv[0]} on the host") from exc
    except subprocess.CalledProcessError as exc:
        raise SandboxUnavailable(
            f"{argv[0]} failed: {(exc.stderr or exc.stdout).strip()[:300]}"
        ) from exc
    return done.stdout.strip()


def create(folder: Path, name: str, size_bytes: int, uid: int = 1000) -> tuple[Path, str]:
    """A fresh ext4 image of ``size_bytes`` owned by ``uid``, attached: (image, device)."""
    folder.mkdir(parents=True, exist_ok=True)
    image = _claim(folder, name)
    with image.open("r+b") as handle:
        handle.truncate(size_bytes)  # sparse: blocks are only used when written
    try:
        # lazy_journal_init: the image is a fresh sparse file, so its journal
        # already reads as zeros; writing them would cost 64 MiB of host disk
        # per 4 GiB volume (measured: 67 MiB -> 2 MiB per fresh image).
        options = f"root_owner={uid}:{uid},lazy_journal_init=1,nodiscard"
        _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", options, str(image))
        # A workspace starts empty: no lost+found for tools and models to trip on.
        _run("debugfs", "-w", "-R", "rmdir lost+found", str(image))
        device = _run("losetup", "--find", "--show", str(image))
    except BaseException:
        image.unlink(missing_ok=True)
        raise
    return image, device


def check_room(folder: Path, reserve: int) -> None:
    """Refuse a new disk while the host file system of ``folder`` has less
    than ``reserve`` free (issue 23 item 10: sparse images grow as sandboxes
    write, and about 18 full ones filled this host's disk)."""
    folder.mkdir(parents=True, exist_ok=True)
    found = os.statvfs(folder)
    free = found.f_bavail * found.f_frsize
    if free < reserve:
        raise ResourceExhausted(
            f"the host has {free >> 20} MiB free for workspace disks, under the operator's "
            f"reserve of {reserve >> 20} MiB (SANDBOXD_DISK_RESERVE_BYTES): no new disk "
            "until space is freed"
        )


def _claim(folder: Path, name: str) -> Path:
    """``name``'s image file, created empty and exclusively (``O_EXCL``): an
    existing image is never written over (issue 23 item 4: another
    namespace's disk was deleted by a create that reached its name). A
    leftover that no loop device holds (a create killed half-way) is
    replaced; one attached to a device is in use and refused."""
    image = folder / f"{name}.img"
    for _ in range(2):
        try:
            os.close(os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            return image
        except FileExistsError:
            if _attached(image):
                raise SandboxUnavailable(
                    f"disk image {image} already exists and is in use; not written over"
                ) from None
            image.unlink(missing_ok=True)
    raise SandboxUnavailable(f"disk image {image} keeps being created by someone else")


def _attached(image: Path) -> bool:
    try:
        return bool(_run("losetup", "--associated", str(image)).strip())
    except SandboxUnavailable:
        return True  # cannot tell: keep it


def remove(image: Path) -> None:
    """Detach every loop device of ``image`` and delete it."""
    with contextlib.suppress(SandboxUnavailable):
        for line in _run("losetup", "--associated", str(image)).splitlines():
            device = line.split(":", 1)[0]
            with contextlib.suppress(SandboxUnavailable):
                _run("losetup", "--detach", device)
    image.unlink(missing_ok=True)


def loop_devices() -> list[str]:
    """Every attached loop device, one ``losetup --list`` line each (device and image)."""
    try:
        listed = _run("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE")
    except SandboxUnavailable:
        return []
    return [line for line in listed.splitlines() if line.strip()]


def detach_deleted(folder: Path) -> list[str]:
    """Detach loop devices whose image in ``folder`` was deleted: the leftovers
    of a process killed between ``create`` and its volume (or a cleanup that
    never ran). Nothing can use such a device again. Returns the devices."""
    detached = []
    prefix = f"{folder}/"
    for line in loop_devices():
        device, _, back_file = line.partition(" ")
        if back_file.startswith(prefix) and back_file.endswith(" (deleted)"):
            with contextlib.suppress(SandboxUnavailable):
                _run("losetup", "--detach", device)
                detached.append(device)
    return detached


def reattach(image: Path, device: str) -> bool:
    """Attach ``image`` to ``device`` again if nothing backs it (after a reboot).

    The volume names its device (Docker mounts ``device=/dev/loopN``), so the
    image must come back on that same device. True when it was re-attached;
    False when it already was; SandboxUnavailable when it cannot be.
    """
    if not image.exists():
        raise SandboxUnavailable(f"disk image {image} of a workspace volume is gone")
    if _run("losetup", "--associated", str(image)):
        return False
    _run("losetup", device, str(image))
    return True


#: The probe's image: small (mkfs takes a few ms), removed at once.
PROBE_BYTES = 16 << 20


def probe(folder: Path, name: str) -> str | None:
    """Try the whole chain once: image, mkfs, loop device, mount, unmount.

    None when this host can give workspaces disks of their own; otherwise
    the reason, for the daemon to say loudly (log and GetStatus).
    """
    if os.geteuid() != 0:
        return "sandboxd is not root (loop devices and mounts need it)"
    if not Path("/dev/loop-control").exists():
        return "no /dev/loop-control on this host (no loop device support)"
    try:
        image, device = create(folder, name, PROBE_BYTES)
    except (SandboxUnavailable, OSError) as exc:
        return f"a disk image cannot be made in {folder}: {exc}"
    try:
        mountpoint = tempfile.mkdtemp(prefix="sandboxd-disk-probe-")
        try:
            _run("mount", "-t", "ext4", device, mountpoint)
            _run("umount", mountpoint)
        finally:
            os.rmdir(mountpoint)
    except (SandboxUnavailable, OSError) as exc:
        return f"a loop device cannot be mounted: {exc}"
    finally:
        remove(image)
    return None


def copy(source: Path, mountpoint: str | None, folder: Path, name: str) -> tuple[Path, str]:
    """Copy the image ``source`` as ``name``'s image, at a consistent point:
    (image, method), method ``image-reflink`` or ``image-copy``.

    The caller has paused every writer (the source container). When the
    image is mounted at ``mountpoint``, the filesystem is frozen for the copy
    (``fsfreeze``: dirty data written out, journal emptied), so the copy is a
    clean filesystem of that moment. Cost: O(data blocks), not O(files): a
    reflink clones the blocks copy-on-write where the host filesystem can,
    otherwise a sparse copy skips the image's holes.
    """
    image = _claim(folder, name)
    method = "image-reflink" if _reflinks(str(folder)) else "image-copy"
    frozen = False
    try:
        try:
            if mountpoint is not None:
                try:
                    _run("fsfreeze", "--freeze", mountpoint)
                    frozen = True
                except SandboxUnavailable:
                    # No freeze (e.g. not supported here): the paused writers and
                    # a sync still give a state the copy's journal replays into.
                    _run("sync", "--file-system", mountpoint)
            _run(
                "cp", "--reflink=auto", "--sparse=always", "--", str(source), str(image),
                timeout=3600,
            )  # fmt: skip
        finally:
            if frozen:
                _thaw(mountpoint)  # type: ignore[arg-type]
    except BaseException:
        image.unlink(missing_ok=True)
        raise
    return image, method


def _thaw(mountpoint: str) -> None:
    # A source left frozen would hang every write in it: try hard.
    for attempt in range(3):
        try:
            _run("fsfreeze", "--unfreeze", mountpoint)
            return
        except SandboxUnavailable:
            if attempt == 2:
                raise


@functools.cache
def _reflinks(folder: str) -> bool:
    # Asked once per folder: the probe writes and clones two files.
    return clone.reflink_supported(folder)


def attach(image: Path) -> str:
    """Attach ``image`` to a free loop device; returns the device."""
    return _run("losetup", "--find", "--show", str(image))


@contextlib.contextmanager
def volume_folder(attrs: dict[str, Any], *, writable: bool) -> Iterator[str]:
    """The folder holding a volume's files, for the daemon to copy from or into.

    A disk-image volume is mounted by Docker only while its container runs:
    otherwise its device is mounted here for the moment (read-only unless
    ``writable``), and unmounted after. A plain volume is its Mountpoint.
    """
    mountpoint = str(attrs.get("Mountpoint") or "")
    device = (attrs.get("Options") or {}).get("device") or ""
    if not device or (mountpoint and os.path.ismount(mountpoint)):
        if not os.path.isdir(mountpoint):
            raise SandboxUnavailable(
                f"the volume's folder {mountpoint!r} is not reachable from the daemon; "
                "run sandboxd on the Docker host"
            )
        yield mountpoint
        return
    folder = tempfile.mkdtemp(prefix="sandboxd-volume-")
    try:
        _run("mount", *(() if writable else ("-o", "ro")), device, folder)
        try:
            yield folder
        finally:
            subprocess.run(["umount", folder], capture_output=True)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def allocated(image: Path) -> int:
    """The bytes ``image`` takes on the host's disk (a sparse file's data blocks)."""
    return image.stat().st_blocks * 512


def _cp_image(source: Path, target: Path) -> None:
    _run(
        "cp", "--reflink=auto", "--sparse=always", "--", str(source), str(target), timeout=3600
    )  # fmt: skip


def overwrite(source: Path, target: Path, device: str) -> str:
    """Make the workspace image ``target`` (attached at ``device``, mounted by
    no one: its container is stopped) a copy of ``source``, in place: the
    device stays bound to the same file. Its cached blocks are dropped after
    (``blockdev --flushbufs``), so the next mount reads the copy, not what
    the device saw before. Returns ``image-reflink`` or ``image-copy``.

    Without reflinks the data is written into the blocks ``target`` already
    has (``sparse.overwrite``), not truncated and allocated again by ``cp``."""
    if _reflinks(str(target.parent)):
        method = "image-reflink"
        _cp_image(source, target)
    else:
        method = "image-copy"
        try:
            sparse.overwrite(str(source), str(target))
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise ResourceExhausted(f"no space left to restore the disk image: {exc}") from exc
            if exc.errno not in sparse.UNSUPPORTED:
                raise SandboxUnavailable(f"restoring the disk image failed: {exc}") from exc
            _cp_image(source, target)
    _run("blockdev", "--flushbufs", device)
    return method


@contextlib.contextmanager
def image_folder(image: Path) -> Iterator[str]:
    """A snapshot's disk image, attached read-only and mounted for the moment:
    its files, for a restore into a workspace that is not an image of its size."""
    device = _run("losetup", "--find", "--show", "--read-only", str(image))
    try:
        folder = tempfile.mkdtemp(prefix="sandboxd-image-")
        try:
            # noload: a read-only device cannot replay a journal (the copy was
            # taken frozen, so there is none to replay).
            _run("mount", "-t", "ext4", "-o", "ro,noload", device, folder)
            try:
                yield folder
            finally:
                subprocess.run(["umount", folder], capture_output=True)
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
    finally:
        with contextlib.suppress(SandboxUnavailable):
            _run("losetup", "--detach", device)

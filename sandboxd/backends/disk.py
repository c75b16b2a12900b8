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
import os
import subprocess
import tempfile
from pathlib import Path

from sandboxd.errors import SandboxUnavailable

#: Label on the volume naming its image file, so deletion finds it again.
DISK_LABEL = "sandboxd.disk"


def _run(*argv: str) -> str:
    try:
        done = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60)
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
    image = folder / f"{name}.img"
    image.unlink(missing_ok=True)
    with image.open("wb") as handle:
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

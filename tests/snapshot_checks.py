"""Named-snapshot checks shared by the local (http tier) and Docker tiers.

``round_trips``: snapshot -> change -> restore, three times, comparing a
hash of every file (and every file's mode), with the daemon restarted
between each snapshot and its restore; then a sandbox made from a snapshot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from runtime_client import Sandbox
from runtime_client.transport import SandboxTransport

#: Every file's sha256 and mode, and every folder, by path (sorted).
TREE = (
    "find . -mindepth 1 \\( -type d -printf 'dir %p %m\\n' \\) -o "
    "\\( -type f -printf '%p %m ' -exec sha256sum {} \\; \\) -o "
    "\\( -type l -printf 'link %p -> %l\\n' \\) | LC_ALL=C sort"
)


async def tree(box: Sandbox) -> str:
    result = await box.exec(TREE)
    assert result.exit_code == 0, result.stderr
    return result.stdout.decode()


async def _change(box: Sandbox, round_: int) -> None:
    script = (
        f"echo changed {round_} >> a.txt; rm -rf deep; mkdir -p new/{round_}; "
        f"head -c 2048 /dev/urandom > new/{round_}/r.bin; chmod 600 b.bin; rm -f link"
    )
    assert (await box.exec(script)).exit_code == 0


async def seed(box: Sandbox) -> None:
    script = (
        "printf 'alpha\\n' > a.txt; head -c 300000 /dev/urandom > b.bin; chmod 750 b.bin; "
        "mkdir -p deep/er/still && printf 'x' > deep/er/still/x.txt; "
        "mkdir empty; ln -s a.txt link; touch deep/.hidden"
    )
    assert (await box.exec(script)).exit_code == 0


async def round_trips(
    box: Sandbox,
    transport: Callable[[], SandboxTransport],
    restart_daemon: Callable[[], Awaitable[None]],
    prefix: str,
    methods: set[str],
) -> str:
    """``transport()``: the current transport (a restart may give a new one);
    ``methods``: how this backend may copy. Returns the first tree (snapshot
    ``<prefix>-0``'s, kept for the caller; the others are deleted)."""
    await seed(box)
    first = await tree(box)
    for round_ in range(3):
        before = await tree(box)
        taken = await box.snapshot(f"{prefix}-{round_}")
        assert taken.source_id == box.instance_id
        assert taken.method in methods
        assert taken.size_bytes >= 300_000
        await _change(box, round_)
        assert await tree(box) != before
        await restart_daemon()
        box = Sandbox(transport(), box.instance_id)
        names = [s.name for s in await transport().list_snapshots()]
        assert f"{prefix}-{round_}" in names
        restored = await box.restore(f"{prefix}-{round_}")
        assert restored.method in methods
        assert await tree(box) == before, f"round {round_}"
        # The next round starts from something else again.
        assert (await box.exec(f"echo round {round_} >> a.txt")).exit_code == 0
    # A new sandbox from the first snapshot: its files, the source's options.
    made = await transport().create_from_snapshot(f"{prefix}-0", f"{box.instance_id}-copy")
    assert made.sandbox.options.image == (await box.info()).options.image
    copy = Sandbox(transport(), f"{box.instance_id}-copy")
    assert await tree(copy) == first
    assert (await copy.read_file("a.txt")).data == b"alpha\n"
    await copy.delete()
    for round_ in range(1, 3):
        await transport().delete_snapshot(f"{prefix}-{round_}")
    assert [s.name for s in await transport().list_snapshots()] == [f"{prefix}-0"]
    return first

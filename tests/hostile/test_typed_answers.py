"""Issue 23 item 11: inputs that got INTERNAL, or the wrong message, now get
a typed answer that names the cause (runc and runsc)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_client import Sandbox
from sandboxd.contract.errors import InvalidArgument, PermissionDenied
from sandboxd.contract.models import Runtime

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(180)]


@pytest.mark.parametrize("verb", ["start_process", "exec"])
async def test_a_command_too_big_for_execve_is_refused_with_the_limit(
    box: Sandbox, verb: str
) -> None:
    # One argument past the kernel's MAX_ARG_STRLEN (a 10 MB command is the
    # same case, past gRPC's own message limit besides): was E2BIG, INTERNAL.
    with pytest.raises(InvalidArgument, match="at most 131071 bytes per argument"):
        await getattr(box, verb)("echo " + "x" * 200_000)
    # 100k environment entries: each small, together past what execve takes.
    env = {f"V{i}": "x" for i in range(100_000)}
    with pytest.raises(InvalidArgument, match=r"at most 1048576 bytes are accepted"):
        await getattr(box, verb)("true", env=env)
    # The sandbox still answers.
    assert (await box.exec("echo ok")).stdout == b"ok\n"


@pytest.mark.parametrize("verb", ["start_process", "exec"])
async def test_an_inaccessible_cwd_is_named_as_the_cause(box: Sandbox, verb: str) -> None:
    await box.exec("mkdir -p locked && chmod 000 locked")
    with pytest.raises(PermissionDenied) as refused:
        await getattr(box, verb)("true", cwd="locked")
    assert "working directory /workspace/locked is not accessible" in refused.value.message
    assert "not executable" not in refused.value.message


async def test_a_tree_of_files_that_read_short_downloads(
    box: Sandbox, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # /sys files say 4096 bytes and hold a few (some refuse to be read at
    # all): the tar stream broke with "unexpected end of data", INTERNAL.
    result = await box.download_tree("/sys/kernel", tmp_path / "sys")
    if request.node.callspec.params["box"] == Runtime.RUNC:  # gVisor's /sys/kernel is empty
        assert result.entries > 100
        # Says 4096 bytes; its content as the sandbox reads it, not padded.
        thp = "mm/transparent_hugepage/enabled"
        shown = (await box.exec(["cat", f"/sys/kernel/{thp}"])).stdout
        assert (tmp_path / "sys" / thp).read_bytes() == shown
    # And /proc, whose files say 0 bytes and hold more: their content now.
    await box.download_tree("/proc/self", tmp_path / "proc")
    assert b"Pid:" in (tmp_path / "proc" / "status").read_bytes()


async def test_an_upload_into_a_full_disk_is_resource_exhausted_every_time(
    box: Sandbox,
) -> None:
    # 6 of 15 such uploads answered "Internal error from Core" (the client's
    # stream was still sending when the daemon answered).
    filled = await box.exec("head -c 200000000 /dev/zero > fill; sync -f fill", timeout_ms=60_000)
    assert b"No space left on device" in filled.stderr
    answers = []
    for _ in range(15):
        try:
            await box.upload("big.bin", b"\1" * (32 << 20))
            answers.append("OK")
        except Exception as exc:
            answers.append(f"{type(exc).__name__}: {exc}"[:120])
    assert all(a.startswith("ResourceExhausted") for a in answers), answers
    await box.remove("fill")
    assert (await box.upload("small.bin", b"x")).size == 1

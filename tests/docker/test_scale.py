"""Scale without blow-ups, on a real workspace: a 1 GiB file's first page,
200 MB of bash output, and the daemon's memory through both."""

from __future__ import annotations

import pytest

from runtime_client import GrpcSandboxFactory, Sandbox
from tests.helpers import Daemon

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_first_page_of_a_1_gib_file_and_200_mb_of_output(
    roomy_factory: GrpcSandboxFactory, roomy_daemon: Daemon, instance_id: str
) -> None:
    # A 1 GiB file does not fit the tier's 64 MiB disks: the 2 GiB daemon.
    assert roomy_daemon.proc is not None
    box = await roomy_factory.create_sandbox(instance_id)
    try:
        await _exercise(box, roomy_daemon.proc.pid)
    finally:
        await box.delete()


async def _exercise(box: Sandbox, daemon_pid: int) -> None:
    made = await box.bash(
        "yes 'a line of text in a very large file' | head -c 1073741824 > big.txt"
    )
    assert made.fields["exit_code"] == 0
    rss_before = _rss_bytes(daemon_pid)

    page = await box.read("big.txt")
    lines = page.text.split("\n")
    assert lines[0] == "     1\ta line of text in a very large file"
    end = page.fields["end_line"]
    assert isinstance(end, int) and 0 < end <= 2000
    assert lines[end - 1] == f"{end:>6}\ta line of text in a very large file"
    assert page.fields["next_offset"] == end + 1
    assert f"Use offset={end + 1} to read more." in page.text
    # The total is unknown: the file was never scanned past the page.
    assert page.fields["total_lines"] is None

    flood = await box.bash("yes 0123456789abcdef | head -c 209715200")
    assert flood.fields["truncated"] is True and flood.fields["exit_code"] == 0
    assert len(flood.text) <= 30_000
    log_path = flood.fields["log_path"]
    assert isinstance(log_path, str)
    size = await box.exec(["stat", "-c", "%s", log_path])
    # The saved log is capped at 64 MiB; the text says where it is.
    assert int(size.stdout) <= 64 << 20 and log_path in flood.text

    # The daemon only ever held pages and head/tail text, never the data.
    assert _rss_bytes(daemon_pid) - rss_before < 64 << 20

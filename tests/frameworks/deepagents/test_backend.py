"""What ``SandboxdSandbox`` adds to deepagents' suite: timeouts, output bounds,
merged output order, error codes, cancellation and callers on many threads."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from deepagents.backends.protocol import FileUploadResponse

from runtime_client.contrib.deepagents import SandboxdConnection, SandboxdSandbox
from runtime_client.contrib.deepagents.backend import TIMEOUT_EXIT_CODE
from tests.helpers import Daemon

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def connection(frameworks_daemon: Daemon) -> Iterator[SandboxdConnection]:
    with SandboxdConnection(frameworks_daemon.target) as sandboxd:
        yield sandboxd


@pytest.fixture(scope="module")
def backend(connection: SandboxdConnection) -> Iterator[SandboxdSandbox]:
    backend = connection.sandbox(f"deepagents-backend-{secrets.token_hex(3)}")
    try:
        yield backend
    finally:
        connection.delete(backend.id)


def test_a_command_past_its_timeout_is_killed_and_says_so(backend: SandboxdSandbox) -> None:
    result = backend.execute("echo started; sleep 30; echo never", timeout=1)
    assert result.exit_code == TIMEOUT_EXIT_CODE
    assert result.output.startswith("started\n")
    assert "never" not in result.output
    assert "timed out after 1 seconds" in result.output


def test_output_past_the_bound_is_dropped_but_the_command_runs_on(
    connection: SandboxdConnection, backend: SandboxdSandbox
) -> None:
    small = connection.sandbox(backend.id, max_output_bytes=1000)
    result = small.execute("head -c 200000 /dev/zero | tr '\\0' x; echo; exit 3")
    assert result.truncated is True
    assert result.exit_code == 3  # the command finished: its output was read, not held back
    assert result.output.startswith("x" * 1000 + "\n\n... Output truncated at 1000 bytes.")


def test_stdout_and_stderr_merge_in_the_order_written(backend: SandboxdSandbox) -> None:
    result = backend.execute("echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three")
    assert result.output == "one\ntwo\nthree\n"
    assert result.exit_code == 0


def test_commands_start_in_the_workspace(backend: SandboxdSandbox) -> None:
    assert backend.execute("pwd").output == "/workspace\n"


def test_bad_timeouts_are_refused(backend: SandboxdSandbox, connection: SandboxdConnection) -> None:
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        backend.execute("true", timeout=-1)
    with pytest.raises(ValueError, match="positive number of seconds"):
        connection.sandbox(backend.id, timeout=0)


def test_transfers_fail_one_by_one_with_deepagents_codes(backend: SandboxdSandbox) -> None:
    backend.execute("mkdir -p /tmp/codes/folder")
    responses = backend.upload_files(
        [
            ("/usr/read-only.txt", b"x"),  # the root filesystem is read-only
            ("/tmp/codes/folder", b"x"),  # a folder is there
            ("/tmp/codes/ok.txt", b"fine"),
        ]
    )
    assert responses == [
        FileUploadResponse(path="/usr/read-only.txt", error="permission_denied"),
        FileUploadResponse(path="/tmp/codes/folder", error="is_directory"),
        FileUploadResponse(path="/tmp/codes/ok.txt", error=None),
    ]
    downloads = backend.download_files(["/etc/shadow", "/tmp/codes/ok.txt"])
    assert [(d.error, d.content) for d in downloads] == [
        ("permission_denied", None),
        (None, b"fine"),
    ]


async def test_a_cancelled_aexecute_stops_its_command(backend: SandboxdSandbox) -> None:
    marker = f"/tmp/cancelled-{secrets.token_hex(3)}"
    task = asyncio.create_task(backend.aexecute(f"sleep 2; touch {marker}"))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(2.5)
    check = await backend.aexecute(f"test -e {marker}; echo $?")
    assert check.output == "1\n"  # the command was killed before it could touch the file


def test_sync_callers_on_many_threads_share_the_connection(backend: SandboxdSandbox) -> None:
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda n: backend.execute(f"echo {n}").output, range(16)))
    assert outputs == [f"{n}\n" for n in range(16)]

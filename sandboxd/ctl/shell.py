"""``sandboxctl shell``: this terminal, attached to a shell on a PTY in the sandbox.

The local terminal goes into raw mode (every key, ^C included, goes to the
sandbox's terminal, whose line discipline does the rest), its size follows
the local window on SIGWINCH, and the command exits with the shell's status.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import termios
import tty
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from runtime_client.processes import Process
from runtime_client.sandbox import Sandbox

_DEFAULT_SIZE = (24, 80)


def terminal_size(fd: int) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return _DEFAULT_SIZE
    return (size.lines or _DEFAULT_SIZE[0], size.columns or _DEFAULT_SIZE[1])


@contextlib.contextmanager
def raw_mode(fd: int) -> Iterator[None]:
    if not os.isatty(fd):
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def interactive(
    sandbox: Sandbox,
    command: str | Sequence[str],
    *,
    stdin_fd: int,
    stdout: BinaryIO,
    cwd: str = "",
) -> int:
    """Run ``command`` on a PTY, wired to this terminal; its exit status."""
    term = os.environ.get("TERM", "xterm-256color")
    proc = await sandbox.start_process(
        command, cwd=cwd, env={"TERM": term}, pty=terminal_size(stdin_fd)
    )
    loop = asyncio.get_running_loop()
    keys: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=64)

    def on_key() -> None:
        try:
            data = os.read(stdin_fd, 4096)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(stdin_fd)
        with contextlib.suppress(asyncio.QueueFull):
            keys.put_nowait(data or None)

    resizes: set[asyncio.Task[None]] = set()

    def on_resize() -> None:
        rows, cols = terminal_size(stdin_fd)
        task = loop.create_task(_quietly(proc.resize(rows, cols)))
        resizes.add(task)
        task.add_done_callback(resizes.discard)

    async def forward_keys() -> None:
        while (data := await keys.get()) is not None:
            await proc.write(data)
        await proc.close_stdin()

    with raw_mode(stdin_fd):
        loop.add_reader(stdin_fd, on_key)
        loop.add_signal_handler(signal.SIGWINCH, on_resize)
        typing = asyncio.create_task(_quietly(forward_keys()))
        try:
            async for chunk in proc:
                stdout.write(chunk.data)
                stdout.flush()
        finally:
            loop.remove_signal_handler(signal.SIGWINCH)
            loop.remove_reader(stdin_fd)
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
            await proc.detach()
    return _status(proc)


def _status(proc: Process) -> int:
    if proc.exit is None:
        return 125  # the connection ended before the shell did
    code = proc.exit.info.exit_code
    return 125 if code is None else code


async def _quietly(work: object) -> None:
    # Keys typed after the shell exited, or a resize racing its exit: nothing to do.
    with contextlib.suppress(Exception):
        await work  # type: ignore[misc]

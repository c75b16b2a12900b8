"""Ecosystem tier: sandboxd driven by clients this project did not write
(the MCP SDK's client, pytest's pytester, typer's CliRunner).

One local-backend daemon process serves the whole module that asks for it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.helpers import Daemon


@pytest.fixture(scope="module")
def local_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    folder = tmp_path_factory.mktemp("eco")
    daemon = Daemon(
        folder / "s.sock",
        "--backend",
        "local",
        "--local-root",
        str(folder / "root"),
        "--drain-seconds",
        "2",
    ).start()
    try:
        yield daemon
    finally:
        daemon.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

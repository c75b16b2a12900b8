"""One in-process server (local backend, temporary root) for the whole fuzz run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fuzz.harness import FuzzServer

_servers: list[FuzzServer] = []


@pytest.fixture(scope="session")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzServer]:
    server = FuzzServer(tmp_path_factory.mktemp("fuzz")).start()
    _servers.append(server)
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for server in _servers:
        terminalreporter.section("fuzz: generated calls")
        for line in server.summary():
            terminalreporter.write_line(line)

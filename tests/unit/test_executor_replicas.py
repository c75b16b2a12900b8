"""Several daemons (replicas) serving one executor at once (executor.owners).

Each daemon's channel has its own calls, ids, streams and transfers; what the
sandbox has one of (the egress proxies' listeners, the trusted CA) has one
owner: the channel whose hello is the newest among those still open. An
earlier owner stands by and never takes it back while the newer one lives;
when the owner's channel closes the next one owns again, at once.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sandboxd.backends.shared.channel import ExecutorChannel
from sandboxd.executor import pipes as executor_pipes
from sandboxd.executor import trust, wire
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.main import _Server
from sandboxd.executor.owners import Owners
from tests.executor_outlet import RecordingOutlet
from tests.helpers import wait_until as _wait

pytestmark = [pytest.mark.unit]


def _pem(tag: str) -> str:
    return f"-----BEGIN CERTIFICATE-----\n{tag}\n-----END CERTIFICATE-----\n"


# ------------------------------------------------------------ who owns


def test_the_newest_open_hello_owns_and_a_close_hands_it_back() -> None:
    owners = Owners()
    one, two, three = object(), object(), object()
    assert owners.owns(one) and owners.owns(two)  # nobody said hello yet
    owners.hello(one, {"trust": "1"})
    owners.hello(two, {"trust": "2"})
    assert owners.owner() is two and not owners.owns(one)
    owners.hello(three, {"trust": "3"})
    # A channel that is not the owner closing changes nothing.
    assert owners.closed(two) is None
    assert owners.owner() is three
    # The owner closing hands the sandbox to the newest left, with its hello.
    assert owners.closed(three) == {"trust": "1"}
    assert owners.owner() is one
    # Saying hello again makes a channel the newest.
    owners.hello(two, {"trust": "2b"})
    assert owners.owner() is two
    assert owners.closed(object()) is None  # never said hello


def test_the_attach_stream_owns_only_while_no_direct_connection_does() -> None:
    owners = Owners()
    stdio, direct_a, direct_b = object(), object(), object()
    owners.fallback = stdio
    owners.hello(stdio, {"n": 0})
    assert owners.owner() is stdio
    owners.hello(direct_a, {"n": 1})
    # Daemon B says its first hello on the shared attach stream, then on its
    # own connection: A owns in between (the attach stream never closes, so
    # it must not outrank a live direct connection).
    owners.hello(stdio, {"n": 2})
    assert owners.owner() is direct_a
    owners.hello(direct_b, {"n": 3})
    assert owners.owner() is direct_b
    assert owners.closed(direct_b) == {"n": 1}  # B died: A again, not the stream
    assert owners.closed(direct_a) == {"n": 2}
    assert owners.owner() is stdio


# ------------------------------------------------------------ what hello sets up


@pytest.fixture
def ex(tmp_path: Path) -> Executor:
    (tmp_path / "w").mkdir()
    (tmp_path / "state").mkdir()
    executor = Executor(str(tmp_path / "w"), state_dir=str(tmp_path / "state"))
    yield executor
    executor.close()


def test_a_hello_or_a_close_aborts_only_that_channels_transfers(
    ex: Executor, tmp_path: Path
) -> None:
    one, two = object(), object()
    ex.handle("hello", {}, channel=one)
    ex.handle("hello", {}, channel=two)
    ex.handle("upload_begin", {"session": "a", "path": "a"}, channel=one)
    ex.handle("upload_begin", {"session": "b", "path": "b"}, channel=two)
    # Daemon one reconnects on its channel: its upload goes, two's goes on.
    ex.handle("hello", {}, channel=one)
    assert ex.transfers.count() == 1
    ex.handle("upload_chunk", {"session": "b", "offset": 0, "data": b"bb"}, channel=two)
    ex.channel_closed(two)
    assert ex.transfers.count() == 0
    temps = [n for n in os.listdir(tmp_path / "w") if n.startswith(".sandboxd-upload-")]
    assert temps == []


def test_the_owners_ca_is_trusted_and_handed_back_when_it_goes(ex: Executor) -> None:
    one, two = object(), object()
    ex.handle("hello", {"trust": _pem("one")}, channel=one)
    ex.handle("hello", {"trust": _pem("two")}, channel=two)
    ca_file = Path(ex.state_dir) / trust.CA_FILE
    assert ca_file.read_text() == _pem("two")
    ex.channel_closed(one)  # not the owner: nothing changes
    assert ca_file.read_text() == _pem("two")
    ex.handle("hello", {"trust": _pem("one")}, channel=one)
    ex.channel_closed(one)  # the owner went: two's CA is in force again
    assert ca_file.read_text() == _pem("two")
    assert ex.base_env["NODE_EXTRA_CA_CERTS"] == str(ca_file)


# ------------------------------------------------------------ the proxies' listeners


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Listen:
    """One daemon's pipe_listen of ``port`` on its own thread."""

    def __init__(self, pipes: executor_pipes.Pipes, owners: Owners, channel: object, port: int):
        self.events: list[Mapping[str, Any]] = []
        self.cancel = threading.Event()
        self.result: object = None
        self.thread = threading.Thread(
            target=self._run, args=(pipes, owners, channel, port), daemon=True
        )
        self.thread.start()

    def _run(self, pipes: executor_pipes.Pipes, owners: Owners, channel: object, port: int) -> None:
        self.result = pipes.listen(
            [("http", "127.0.0.1", port)],
            self.cancel,
            self.events.append,
            owns=lambda: owners.owns(channel),
            channel=channel,
        )

    def kinds(self) -> list[str]:
        return [next(iter(event)) for event in list(self.events)]

    def stop(self) -> None:
        self.cancel.set()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


def test_the_owner_takes_the_listeners_and_the_other_stands_by_without_fighting() -> None:
    pipes, owners = executor_pipes.Pipes(), Owners()
    a, b = object(), object()
    port = _free_port()
    owners.hello(a, {})
    listen_a = _Listen(pipes, owners, a, port)
    assert _wait(lambda: listen_a.kinds() == ["listening"])
    owners.hello(b, {})  # replica B connects: the newest hello owns
    listen_b = _Listen(pipes, owners, b, port)
    assert _wait(lambda: listen_b.kinds() == ["listening"])
    assert _wait(lambda: listen_a.kinds() == ["listening", "standby"])
    # No ping-pong: A stands by while B lives, and B keeps the address.
    time.sleep(1.0)
    assert listen_a.kinds() == ["listening", "standby"]
    assert listen_b.kinds() == ["listening"]
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        assert _wait(lambda: "accepted" in listen_b.kinds())
    assert "accepted" not in listen_a.kinds()
    # B's channel closes (its daemon died): its listen ends, A serves again.
    owners.closed(b)
    listen_b.stop()
    assert _wait(lambda: listen_a.kinds() == ["listening", "standby", "listening"])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        assert _wait(lambda: listen_a.kinds()[-1] == "accepted")
    listen_a.stop()
    assert listen_a.result == {}


def test_a_listen_of_a_channel_that_does_not_own_waits_for_a_held_address() -> None:
    pipes, owners = executor_pipes.Pipes(), Owners()
    a, b = object(), object()
    port = _free_port()
    owners.hello(a, {})
    owners.hello(b, {})
    listen_b = _Listen(pipes, owners, b, port)
    assert _wait(lambda: listen_b.kinds() == ["listening"])
    # A, not the owner, finds the address held: it stands by, B serves on.
    listen_a = _Listen(pipes, owners, a, port)
    assert _wait(lambda: listen_a.kinds() == ["standby"])
    time.sleep(0.5)
    assert listen_b.kinds() == ["listening"]
    # The owner's own gateway restarted on its channel: the earlier listen ends.
    listen_b2 = _Listen(pipes, owners, b, port)
    assert _wait(lambda: listen_b2.kinds() == ["listening"])
    listen_b.thread.join(timeout=5)
    assert listen_b.result == {} and not listen_b.thread.is_alive()
    listen_b2.stop()
    # The address is free: the listen standing by takes it, owner or not.
    assert _wait(lambda: listen_a.kinds() == ["standby", "listening"])
    listen_a.stop()


# ------------------------------------------------------------ two daemons, one server


class _Wire:
    """One daemon's channel to the server, in memory (its own outlet)."""

    def __init__(self, server: _Server, loop: asyncio.AbstractEventLoop) -> None:
        self._server = server
        self._loop = loop
        self._to_daemon: asyncio.Queue[bytes] = asyncio.Queue()
        self._deframer = wire.Deframer(max_line=1 << 30, max_raw=wire.REQUEST_RAW_MAX)
        self.open = True

    # the executor's outlet (its workers call it)
    def write(self, parts: list[bytes]) -> None:
        if not self.open:
            raise OSError("closed")
        self._loop.call_soon_threadsafe(self._to_daemon.put_nowait, b"".join(parts))

    # the daemon's source and sink
    async def read(self) -> bytes:
        return await self._to_daemon.get()

    def sink_write(self, data: bytes) -> None:
        for frame in self._deframer.feed(data):
            assert isinstance(frame, wire.Frame)
            self._server.accept(frame, self)


class _Sink:
    def __init__(self, channel_wire: _Wire) -> None:
        self._wire = channel_wire

    def write(self, data: bytes) -> None:
        self._wire.sink_write(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


@pytest.mark.anyio
async def test_two_daemons_call_one_server_at_once_and_each_gets_its_answers(
    tmp_path: Path,
) -> None:
    (tmp_path / "w").mkdir()
    server = _Server(
        Executor(str(tmp_path / "w"), state_dir=str(tmp_path / "state")), RecordingOutlet()
    )
    loop = asyncio.get_running_loop()
    wires = [_Wire(server, loop), _Wire(server, loop)]
    channels = [
        ExecutorChannel(w, _Sink(w), name=f"daemon-{n}", max_line=1 << 30)
        for n, w in enumerate(wires)
    ]
    try:
        for channel in channels:
            await channel.call("hello", {}, timeout=10)

        async def calls(n: int) -> list[bytes]:
            out = []
            for i in range(50):
                args = {"argv": ["printf", f"{n}-{i}"]}
                out.append((await channels[n].call("exec", args, timeout=30))["stdout"])
            return out

        answers = await asyncio.gather(calls(0), calls(1))
        for n in (0, 1):
            assert answers[n] == [f"{n}-{i}".encode() for i in range(50)]
        # A stream of daemon 0's ends with its channel; daemon 1's goes on.
        streams = [channels[n].stream("exec", {"shell": "sleep 30; echo late"}) for n in (0, 1)]
        tasks = [asyncio.ensure_future(anext(aiter(s))) for s in streams]
        assert await asyncio.to_thread(_wait, lambda: len(server.calls) == 2)
        wires[0].open = False
        server.closed(wires[0])
        assert await asyncio.to_thread(_wait, lambda: len(server.calls) == 1)
        assert [key[0] for key in server.calls] == [wires[1]]
        assert (await channels[1].call("exists", {"path": "."}, timeout=10))["exists"]
        for task in tasks:
            task.cancel()
    finally:
        for channel_wire in wires:
            channel_wire.open = False
            server.closed(channel_wire)
        for channel in channels:
            await channel.close()
        server.executor.close()
        server.pool.shutdown(wait=False, cancel_futures=True)

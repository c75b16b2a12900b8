"""The executor's direct channel (executor.direct) on real unix sockets.

The listener and the server are the executor's own code, run here on the
host: every request is answered on the connection it came on, several
connections (daemon replicas) are served at once, one that ends takes only
its own streams with it; a bad connection, a flood of them or a non-root peer
changes nothing for the rest.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandboxd.executor import direct, wire
from sandboxd.executor.dispatch import Executor
from sandboxd.executor.main import MAX_REQUEST_LINE, _Server
from tests.executor_outlet import RecordingOutlet
from tests.helpers import wait_until as _wait

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (peer uids)")


class _Client:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(wire.encode(message))

    def reply(self) -> dict[str, Any] | None:
        """The next reply line; None once the executor closed the connection."""
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:  # closed with bytes of ours unread
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        value: dict[str, Any] = json.loads(line)
        return value

    def hello(self, request_id: int = 1) -> dict[str, Any] | None:
        self.send({"id": request_id, "op": "hello", "args": {}})
        return self.reply()

    def close(self) -> None:
        self.sock.close()


def _exists(request_id: int) -> wire.Frame:
    return wire.Frame(wire.encode({"id": request_id, "op": "exists", "args": {"path": "."}}))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[_Server, RecordingOutlet, direct.Listener]]:
    (tmp_path / "w").mkdir()
    (tmp_path / "state").mkdir()
    stdout = RecordingOutlet()
    server = _Server(Executor(str(tmp_path / "w"), state_dir=str(tmp_path / "s")), stdout)
    listener = direct.Listener.open(
        str(tmp_path / "state"),
        accept=server.accept,
        closed=server.closed,
        log=lambda message: None,
        max_line=MAX_REQUEST_LINE,
    )
    listener.start()
    server.executor.direct_path = listener.path
    yield server, stdout, listener
    listener.close()
    server.pool.shutdown(wait=False)


def test_the_socket_is_in_a_private_directory(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    _, _, listener = served
    folder = os.stat(os.path.dirname(listener.path))
    assert stat.S_IMODE(folder.st_mode) == 0o700
    assert folder.st_uid == os.geteuid()
    assert stat.S_ISSOCK(os.stat(listener.path).st_mode)
    assert len(os.path.basename(os.path.dirname(listener.path))) == 16


def test_hello_names_the_socket_and_each_channel_gets_its_own_replies(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    server, stdout, listener = served
    server.accept(_exists(1), stdout)
    assert _wait(lambda: len(stdout.replies()) == 1)
    client = _Client(listener.path)
    hello = client.hello(7)
    assert hello is not None and hello["id"] == 7
    assert hello["ok"]["direct"] == listener.path
    # A request that still arrives on stdin is answered on stdout.
    server.accept(_exists(2), stdout)
    assert _wait(lambda: [r["id"] for r in stdout.replies()] == [1, 2])
    client.send({"id": 3, "op": "exists", "args": {"path": "."}})
    assert client.reply() == {"id": 3, "ok": {"exists": True, "type": "directory"}}
    assert len(stdout.replies()) == 2
    client.close()


def test_a_hello_on_stdin_leaves_the_socket_serving(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    server, stdout, listener = served
    client = _Client(listener.path)
    assert client.hello() is not None
    server.accept(wire.Frame(wire.encode({"id": 9, "op": "hello", "args": {}})), stdout)
    assert _wait(lambda: any(r["id"] == 9 for r in stdout.replies()))
    client.send({"id": 2, "op": "exists", "args": {"path": "."}})
    assert client.reply() == {"id": 2, "ok": {"exists": True, "type": "directory"}}
    assert listener.connections() == 1
    client.close()


def test_two_daemons_with_the_same_ids_each_get_their_own_answers(
    served: tuple[_Server, RecordingOutlet, direct.Listener], tmp_path: Path
) -> None:
    _, _, listener = served
    for name in ("a", "b"):
        (tmp_path / "w" / name).write_text(name * 3)
    one, two = _Client(listener.path), _Client(listener.path)
    assert one.hello(1) is not None
    assert two.hello(1) is not None
    # Interleaved, the same request ids on both: neither hello took the
    # other's replies, nor closed the other's connection.
    for request_id in range(2, 52):
        one.send(_tool(request_id, "read", file_path="a"))
        two.send(_tool(request_id, "read", file_path="b"))
    got_one, got_two = _replies(one, 50), _replies(two, 50)
    assert {r["ok"]["text"] for r in got_one.values()} == {"     1\taaa"}
    assert {r["ok"]["text"] for r in got_two.values()} == {"     1\tbbb"}
    assert listener.connections() == 2
    one.close()
    two.close()


def _sleeping_streams(listener: direct.Listener, *ids: int) -> list[_Client]:
    """A daemon per id, each with a streamed call of that id running."""
    clients = []
    for request_id in ids:
        client = _Client(listener.path)
        assert client.hello() is not None
        stream = {"op": "exec", "stream": True, "credits": 64, "args": {"shell": "sleep 30"}}
        client.send({"id": request_id, **stream})
        clients.append(client)
    return clients


def test_a_cancel_reaches_only_its_own_channels_call(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    server, _, listener = served
    one, two = _sleeping_streams(listener, 5, 5)
    assert _wait(lambda: len(server.calls) == 2)
    # One's cancel of its id 5 ends one's call only; two's runs on.
    one.send({"op": "cancel", "target": 5})
    ended = one.reply()
    assert ended is not None and ended["id"] == 5
    two.sock.settimeout(1.0)
    with pytest.raises(TimeoutError):
        two.sock.recv(1)
    two.sock.settimeout(10)
    two.send({"op": "cancel", "target": 5})
    ended = two.reply()
    assert ended is not None and ended["id"] == 5
    one.close()
    two.close()


def test_a_closed_channel_ends_its_own_streams_and_nobody_elses(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    server, _, listener = served
    one, two = _sleeping_streams(listener, 5, 6)
    assert _wait(lambda: len(server.calls) == 2)
    one.close()  # its daemon died
    assert _wait(lambda: len(server.calls) == 1)
    assert [request_id for _, request_id in server.calls] == [6]
    two.send({"id": 7, "op": "exists", "args": {"path": "."}})
    assert two.reply() == {"id": 7, "ok": {"exists": True, "type": "directory"}}
    two.send({"op": "cancel", "target": 6})
    assert _wait(lambda: not server.calls)
    two.close()


def test_a_hello_on_a_channel_ends_the_streams_an_earlier_daemon_left_on_it(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    server, stdout, _ = served
    stream = {"op": "exec", "stream": True, "credits": 64, "args": {"shell": "sleep 30"}}
    server.accept(wire.Frame(wire.encode({"id": 5, **stream})), stdout)
    assert _wait(lambda: len(server.calls) == 1)
    # A restarted daemon on the attach stream (which never closes) says hello.
    server.accept(wire.Frame(wire.encode({"id": 1, "op": "hello", "args": {}})), stdout)
    assert _wait(lambda: not server.calls)


def test_a_dead_daemons_connection_goes_and_the_new_one_serves(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    _, _, listener = served
    old = _Client(listener.path)
    assert old.hello() is not None
    # The old daemon died mid-frame: half a raw frame is all it sent.
    old.sock.sendall(b'{"raw":["data",1000],"id":5,"op":"write_file","args":{}}\n' + b"x" * 10)
    old.close()
    new = _Client(listener.path)
    assert new.hello(1) is not None
    new.send({"id": 2, "op": "exists", "args": {"path": "."}})
    assert new.reply() == {"id": 2, "ok": {"exists": True, "type": "directory"}}
    assert _wait(lambda: listener.connections() == 1)
    new.close()


def test_garbage_and_a_dropped_connection_leave_the_others_serving(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    _, _, listener = served
    good = _Client(listener.path)
    assert good.hello() is not None
    bad = _Client(listener.path)
    bad.sock.sendall(b"\x00\xff not json\n" + os.urandom(4096) + b"\n")
    bad.sock.sendall(b'{"raw":["data",-1]}\n')
    bad.close()
    torn = _Client(listener.path)
    torn.sock.sendall(b'{"id": 1, "op": "exi')
    torn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    torn.close()  # a reset, not a clean end
    good.send({"id": 2, "op": "exists", "args": {"path": "."}})
    assert good.reply() == {"id": 2, "ok": {"exists": True, "type": "directory"}}
    assert _wait(lambda: listener.connections() == 1)
    good.close()


def test_a_flood_of_connections_is_bounded_and_the_quietest_goes_first(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    _, _, listener = served
    # Stale connections a peer never ended (half-open streams of dead daemons).
    stale = [_Client(listener.path) for _ in range(direct.MAX_CONNECTIONS - 1)]
    assert _wait(lambda: listener.connections() == direct.MAX_CONNECTIONS - 1)
    time.sleep(0.05)
    live = _Client(listener.path)
    assert live.hello() is not None
    # A new connection at capacity takes the place of the least recently heard.
    extra = _Client(listener.path)
    assert extra.hello() is not None
    assert stale[0].reply() is None
    assert _wait(lambda: listener.connections() == direct.MAX_CONNECTIONS)
    live.send({"id": 2, "op": "exists", "args": {"path": "."}})
    assert live.reply() == {"id": 2, "ok": {"exists": True, "type": "directory"}}
    for client in [*stale, live, extra]:
        client.close()
    assert _wait(lambda: listener.connections() == 0)
    after = _Client(listener.path)
    assert after.hello() is not None
    after.close()


# Drops to uid 1000 after the interpreter has loaded from root's folders.
CONNECT_AS_1000 = """
import os, socket, sys
os.setgroups([])
os.setresgid(1000, 1000, 1000)
os.setresuid(1000, 1000, 1000)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(10)
try:
    sock.connect(sys.argv[1])
    sock.sendall(bytes.fromhex(sys.argv[2]))
    sys.stdout.write("got:" + sock.recv(100).hex())
except BaseException as exc:
    sys.stdout.write(f"error: {exc!r}")
"""
_HELLO = wire.encode({"id": 1, "op": "hello", "args": {}})


@root_only
def test_a_connection_of_another_uid_is_refused(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
) -> None:
    _, stdout, listener = served
    # Open the way (in a container the root-only directory is the first
    # line): the listener's own uid check is the second. The child enters the
    # directory as root, then connects as uid 1000.
    os.chmod(os.path.dirname(listener.path), 0o711)
    os.chmod(listener.path, 0o777)
    # A fresh interpreter, started without a fork (Popen vforks when no ids
    # are asked): a fork here would run the at-fork handlers of libraries
    # earlier tests loaded (grpc's), which once left a forked child mute.
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_AS_1000, direct.SOCKET_NAME, _HELLO.hex()],
        cwd=os.path.dirname(listener.path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    outcome = done.stdout
    # Closed without a reply (seen as EOF, a reset or a broken pipe).
    assert outcome == "got:" or outcome.startswith(
        ("error: ConnectionResetError", "error: BrokenPipeError")
    ), (outcome, done.stderr)
    assert stdout.replies() == []
    assert listener.connections() == 0


def test_the_directory_is_fresh_even_if_a_name_was_planted(tmp_path: Path) -> None:
    # mkdir refuses anything already there, so a planted symlink never
    # becomes the socket's directory (the name is random besides).
    planted = tmp_path / "state"
    planted.mkdir()
    listener = direct.Listener.open(
        str(planted),
        accept=lambda frame, origin, inline: None,
        closed=lambda origin: None,
        log=lambda message: None,
        max_line=1024,
    )
    try:
        assert os.path.dirname(os.path.dirname(listener.path)) == str(planted)
        assert not os.path.islink(os.path.dirname(listener.path))
    finally:
        listener.close()


# ------------------------------------------------------------ quick calls on the reader


def _tool(request_id: int, name: str, **args: Any) -> dict[str, Any]:
    return {"id": request_id, "op": "tool", "args": {"name": name, "args": args}}


def _replies(client: _Client, count: int) -> dict[int, dict[str, Any]]:
    got: dict[int, dict[str, Any]] = {}
    while len(got) < count:
        reply = client.reply()
        assert reply is not None, f"the connection closed after {sorted(got)}"
        got[reply["id"]] = reply
    return got


def _gate_reads(
    server: _Server, monkeypatch: pytest.MonkeyPatch, gate: threading.Event
) -> dict[str, str]:
    """Reads of a file named "slow" wait for ``gate`` (a file a workload made
    slow); every tool call records the thread that ran it."""
    threads: dict[str, str] = {}
    handle = server.executor.handle

    def gated(op: str, args: Any, *rest: Any) -> Any:
        if op != "tool":
            return handle(op, args, *rest)
        tool_args = args.get("args") or {}
        threads[str(tool_args.get("file_path") or tool_args.get("pattern"))] = (
            threading.current_thread().name
        )
        if tool_args.get("file_path") == "slow":
            assert gate.wait(10)
        return handle(op, args, *rest)

    monkeypatch.setattr(server.executor, "handle", gated)
    return threads


def test_a_quick_tool_runs_on_the_reader_thread_and_others_on_workers(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _, listener = served
    threads = _gate_reads(server, monkeypatch, threading.Event())
    (tmp_path / "w" / "a.txt").write_text("a\n")
    client = _Client(listener.path)
    assert client.hello() is not None
    client.send(_tool(2, "read", file_path="a.txt"))
    client.send(_tool(3, "glob", pattern="*.txt"))
    replies = _replies(client, 2)
    assert replies[2]["ok"]["text"] == "     1\ta"
    assert replies[3]["ok"]["text"] == "a.txt"
    assert threads == {"a.txt": "direct-read", "*.txt": threads["*.txt"]}
    assert threads["*.txt"].startswith("op")  # glob walks a tree: a worker's
    client.close()


def test_a_quick_call_that_stalls_hands_the_reading_on(
    served: tuple[_Server, RecordingOutlet, direct.Listener],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _, listener = served
    gate = threading.Event()
    threads = _gate_reads(server, monkeypatch, gate)
    (tmp_path / "w" / "slow").write_text("slow\n")
    (tmp_path / "w" / "fast").write_text("fast\n")
    client = _Client(listener.path)
    assert client.hello() is not None
    # One chunk: the slow read and a quick one queued behind it on the same reader.
    client.sock.sendall(
        wire.encode(_tool(2, "read", file_path="slow"))
        + wire.encode(_tool(3, "read", file_path="fast"))
    )
    started = time.monotonic()
    assert _replies(client, 1)[3]["ok"]["text"] == "     1\tfast"
    # The watchdog gave the reading (and what was queued) to a new thread.
    assert time.monotonic() - started < 2.0
    client.send(_tool(4, "write", file_path="new", content="x"))
    assert _replies(client, 1)[4]["ok"]["text"].startswith("Created new")
    assert threads["fast"] == threads["new"] == "direct-read"
    readers = [t for t in threading.enumerate() if t.name == "direct-read"]
    assert len(readers) == 2  # the held one and its successor
    gate.set()
    assert _replies(client, 1)[2]["ok"]["text"] == "     1\tslow"
    # The held-up thread left once its call ended; one reader goes on.
    assert _wait(lambda: len([t for t in threading.enumerate() if t.name == "direct-read"]) == 1)
    client.send(_tool(5, "read", file_path="fast"))
    assert _replies(client, 1)[5]["ok"]["text"] == "     1\tfast"
    client.close()

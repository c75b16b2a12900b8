"""The daemon's checks before it uses an executor's socket (backends.docker.direct).

A fake procfs root stands in for ``/proc``: ``<proc>/<pid>/root/run/sandboxd/
<dir>/s`` is whatever the test plants there (a real socket, a symlink, a
file). The listener's credentials are real: a child process of this test
listens, so this test process plays the container's init.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxd.backends.docker.direct import DirectUnavailable, check_path, connect, executor_gone

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (listener uids)")

LISTEN = (
    "import os, socket, sys, time\n"
    "os.chdir(os.path.dirname(sys.argv[1]))\n"  # a unix path holds 107 bytes
    "if len(sys.argv) > 2:\n"
    "    os.setresgid(1000, 1000, 1000)\n"
    "    os.setresuid(1000, 1000, 1000)\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.bind(os.path.basename(sys.argv[1]))\n"
    "s.listen(4)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


class _Tree:
    def __init__(self, proc: Path) -> None:
        self.proc = proc
        self.name = f"/run/sandboxd/{secrets.token_hex(8)}/s"
        self.pid = os.getpid()
        self.path = proc / str(self.pid) / "root" / self.name.lstrip("/")
        self.path.parent.mkdir(parents=True)
        self.children: list[subprocess.Popen[bytes]] = []

    def listen(self, *, as_user: bool = False) -> int:
        if as_user:
            os.chmod(self.path.parent, 0o777)
        args = [sys.executable, "-c", LISTEN, str(self.path), *(["user"] if as_user else [])]
        child = subprocess.Popen(args, stdout=subprocess.PIPE)
        self.children.append(child)
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        return child.pid


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[_Tree]:
    planted = _Tree(tmp_path / "proc")
    yield planted
    for child in planted.children:
        child.kill()
        child.wait()


def test_only_the_executors_path_shape_is_accepted() -> None:
    good = f"/run/sandboxd/{'a' * 16}/s"
    assert check_path(good) == good
    for bad in (
        None,
        7,
        "",
        "/var/run/docker.sock",
        f"/run/sandboxd/{'a' * 16}/../../../var/run/docker.sock",
        f"/run/sandboxd/{'A' * 16}/s",
        f"/run/sandboxd/{'a' * 16}/s/",
        f"run/sandboxd/{'a' * 16}/s",
        f"/run/sandboxd/{'a' * 16}/s\n",
    ):
        with pytest.raises(DirectUnavailable):
            check_path(bad)


@root_only
def test_the_executor_is_accepted(tree: _Tree) -> None:
    listener = tree.listen()
    sock = connect(tree.pid, tree.name, listener, proc=str(tree.proc))
    sock.close()


@root_only
def test_a_listener_of_the_sandbox_user_is_refused(tree: _Tree) -> None:
    listener = tree.listen(as_user=True)
    with pytest.raises(DirectUnavailable, match="uid 1000"):
        connect(tree.pid, tree.name, listener, proc=str(tree.proc))


@root_only
def test_a_listener_that_is_not_a_child_of_the_containers_init_is_refused(
    tree: _Tree,
) -> None:
    # A root process elsewhere (a host socket a symlink would lead to, another
    # container): here this test process itself listens.
    own = socket.socket(socket.AF_UNIX)
    folder = os.open(tree.path.parent, os.O_PATH)
    own.bind(f"/proc/self/fd/{folder}/s")
    os.close(folder)
    own.listen(1)
    try:
        with pytest.raises(DirectUnavailable, match="not a child"):
            connect(tree.pid, tree.name, tree.pid, proc=str(tree.proc))
    finally:
        own.close()


@root_only
def test_a_listener_that_is_not_the_executor_that_said_hello_is_refused(tree: _Tree) -> None:
    listener = tree.listen()
    with pytest.raises(DirectUnavailable, match="not the executor"):
        connect(tree.pid, tree.name, listener + 1, proc=str(tree.proc))


def test_a_symlink_is_not_followed(tree: _Tree, tmp_path: Path) -> None:
    # Under /proc/<pid>/root an absolute symlink resolves against the HOST
    # root: a planted one could lead to any host socket.
    elsewhere = Path(f"/tmp/sandboxd-test-{secrets.token_hex(4)}.sock")
    host = socket.socket(socket.AF_UNIX)
    host.bind(str(elsewhere))
    host.listen(1)
    try:
        tree.path.symlink_to(elsewhere)
        # O_PATH|O_NOFOLLOW opens the link itself, which is no socket.
        with pytest.raises(DirectUnavailable, match="not a socket"):
            connect(tree.pid, tree.name, 2, proc=str(tree.proc))
    finally:
        host.close()
        elsewhere.unlink()


def test_a_file_that_is_not_a_socket_is_refused(tree: _Tree) -> None:
    tree.path.write_bytes(b"")
    with pytest.raises(DirectUnavailable, match="not a socket"):
        connect(tree.pid, tree.name, 2, proc=str(tree.proc))


def test_nothing_there_or_no_pid_is_refused(tree: _Tree) -> None:
    with pytest.raises(DirectUnavailable, match="cannot open"):
        connect(tree.pid, tree.name, 2, proc=str(tree.proc))
    for pid in (None, 0, -1, "1"):
        with pytest.raises(DirectUnavailable, match="no host pid"):
            connect(pid, tree.name, 2, proc=str(tree.proc))
        with pytest.raises(DirectUnavailable, match="gave no pid"):
            connect(tree.pid, tree.name, pid, proc=str(tree.proc))


@root_only
def test_a_listener_that_is_gone_is_refused(tree: _Tree) -> None:
    listener = tree.listen()
    tree.children[0].kill()
    tree.children[0].wait()
    time.sleep(0.05)
    with pytest.raises(DirectUnavailable):
        connect(tree.pid, tree.name, listener, proc=str(tree.proc))


@pytest.mark.parametrize("link", ["absolute", "relative"])
def test_a_symlinked_folder_on_the_way_is_not_followed(
    tree: _Tree, tmp_path: Path, link: str
) -> None:
    # The socket's own folder replaced by a symlink to a host folder holding a
    # listening "s": resolved on the host it would be connected to before any
    # peer check. Nothing on the way is followed, so nothing is connected.
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    host = socket.socket(socket.AF_UNIX)
    folder = os.open(host_dir, os.O_PATH)
    host.bind(f"/proc/self/fd/{folder}/s")
    os.close(folder)
    host.listen(1)
    host.setblocking(False)
    try:
        tree.path.parent.rmdir()
        target = (
            host_dir if link == "absolute" else os.path.relpath(host_dir, tree.path.parent.parent)
        )
        tree.path.parent.symlink_to(target)
        assert (tree.path.parent / "s").is_socket()  # a plain walk would reach it
        with pytest.raises(DirectUnavailable, match=r"cannot open .*symbolic links"):
            connect(tree.pid, tree.name, 2, proc=str(tree.proc))
        with pytest.raises(BlockingIOError):
            host.accept()
    finally:
        host.close()


def test_a_dead_executor_is_told_from_its_inits_children(tmp_path: Path) -> None:
    # /proc/<pid>/task/<pid>/children of the container's init: the executor
    # is its only child.
    proc = tmp_path / "proc"
    task = proc / "40" / "task" / "40"
    task.mkdir(parents=True)
    (task / "children").write_text("41 ")
    (proc / "41").mkdir()
    (proc / "41" / "status").write_text("Name:\tpython3\nState:\tS (sleeping)\nPPid:\t40\n")
    assert not executor_gone(40, proc=str(proc))  # sleeping
    (proc / "41" / "status").write_text("Name:\tpython3\nState:\tZ (zombie)\nPPid:\t40\n")
    assert executor_gone(40, proc=str(proc))  # a zombie not yet reaped
    (proc / "41" / "status").unlink()
    assert executor_gone(40, proc=str(proc))  # reaped between the two reads
    (task / "children").write_text("")
    assert executor_gone(40, proc=str(proc))
    assert executor_gone(77, proc=str(proc))  # the init itself is gone
    for unknown in (None, 0, -1, "40"):
        assert not executor_gone(unknown, proc=str(proc))
    (task / "children").unlink()
    (task / "children").mkdir()  # unreadable as a file: unknown, not gone
    assert not executor_gone(40, proc=str(proc))

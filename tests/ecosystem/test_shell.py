"""``sandboxctl shell`` under a real terminal: tmux runs it, the test types
keys into the pane and reads the screen back.

The shell runs on the local backend here; the PTY, raw mode, SIGWINCH and
the exit status are the same code on every backend.
"""

from __future__ import annotations

import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Daemon

pytestmark = [pytest.mark.inproc, pytest.mark.timeout(120)]

SANDBOXCTL = str(Path(sys.executable).with_name("sandboxctl"))


class Pane:
    def __init__(self, session: str) -> None:
        self.session = session

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def keys(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.session, "-l", text)
        self.tmux("send-keys", "-t", self.session, "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.session, "-S", "-200")

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared; the pane shows:\n{self.screen()}")


@pytest.fixture
def pane(local_daemon: Daemon) -> Iterator[Pane]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing: run scripts/ensure-host-tools.sh (make test does)")
    session = f"sbx-shell-{secrets.token_hex(3)}"
    yield Pane(session)
    subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)


def test_shell_is_an_interactive_terminal(local_daemon: Daemon, pane: Pane) -> None:
    instance = f"shell-{secrets.token_hex(3)}"
    created = subprocess.run(
        [SANDBOXCTL, "--target", local_daemon.target, "create", instance],
        capture_output=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    command = (
        f"{shlex.quote(SANDBOXCTL)} --target {shlex.quote(local_daemon.target)} "
        f"shell {instance}; echo SHELL-EXIT=$?; sleep 60"
    )
    pane.tmux("new-session", "-d", "-s", pane.session, "-x", "100", "-y", "30", command)
    # Typed text is echoed too, so every marker is computed by the shell: the
    # screen shows "OK-2" only when the command ran in the sandbox.
    deadline = time.monotonic() + 30
    while not pane.screen().strip():  # the sandbox's bash prompt
        assert time.monotonic() < deadline, "no prompt"
        time.sleep(0.1)
    pane.keys("tty && echo TTY-$((1+1))")
    screen = pane.wait_for("TTY-2")
    assert "/dev/pts/" in screen and "not a tty" not in screen
    pane.keys("echo SIZE-$((1+1)) $(stty size)")
    pane.wait_for("SIZE-2 30 100")
    # The local window changes size: the sandbox's terminal follows (SIGWINCH).
    pane.tmux("resize-window", "-t", pane.session, "-x", "120", "-y", "40")
    time.sleep(0.5)
    pane.keys("echo SIZE-$((2+1)) $(stty size)")
    pane.wait_for("SIZE-3 40 120")
    # Raw mode: ^C reaches the sandbox's terminal and interrupts its program there.
    pane.keys("sleep 30; echo NOT-$((1+1))-INTERRUPTED")
    time.sleep(1.0)
    pane.tmux("send-keys", "-t", pane.session, "C-c")
    pane.keys("echo AFTER-$((3+4))")
    pane.wait_for("AFTER-7", timeout=10)
    assert "NOT-2-INTERRUPTED" not in pane.screen()
    pane.keys("exit 7")
    pane.wait_for("SHELL-EXIT=7")

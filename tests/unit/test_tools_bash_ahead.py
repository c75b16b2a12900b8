"""bash: the next call's shell, started ahead (``bash._Ready``).

The shell started ahead must be indistinguishable from one spawned for the
call: same state, same wrapper, one call each, and anything wrong with it
(killed, stopped, tampered with, state moved on) means a fresh spawn.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxd.executor.tools import bash
from sandboxd.executor.tools.bash import Shell


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    (tmp_path / "w").mkdir()
    s = Shell(str(tmp_path / "w"), str(tmp_path / "s"))
    yield s
    s.close()


def run(shell: Shell, command: str, **extra: object) -> tuple[str, dict[str, object]]:
    result = shell.run({"command": command, **extra}, threading.Event())
    return result.text, result.fields


def spares(shell: Shell) -> list[bash._Ready]:
    """Wait until every shell the next calls may use is started (one, or two
    while calls come back to back)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with shell._ready_guard:
            current = list(shell._ready)
        if current and len(current) == shell._depth:
            return current
        time.sleep(0.01)
    raise AssertionError("no shell was started ahead")


def ready(shell: Shell) -> bash._Ready:
    """Wait until the next call's shell is started; the one it will get."""
    return spares(shell)[0]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}").exists() else ""
    return "State:\tZ" not in status


def test_the_first_call_spawns(shell: Shell) -> None:
    assert shell._ready == []
    run(shell, "true")
    assert shell.ready_used == 0
    ready(shell)


def test_state_persists_through_shells_started_ahead(shell: Shell, tmp_path: Path) -> None:
    (tmp_path / "w" / "sub").mkdir()
    run(shell, "cd sub && export GREETING='hi there' && export DROP=1")
    ready(shell)
    run(shell, "unset DROP")
    ready(shell)
    text, fields = run(shell, 'pwd; echo "$GREETING"; echo "${DROP-unset}"')
    assert text.splitlines()[:3] == [str(tmp_path / "w" / "sub"), "hi there", "unset"]
    assert fields["exit_code"] == 0
    assert shell.ready_used >= 2


def test_each_shell_serves_one_call(shell: Shell) -> None:
    run(shell, "true")
    pids = []
    for _ in range(5):
        ready(shell)
        text, _ = run(shell, "echo $$")
        pids.append(int(text.splitlines()[0]))
    assert len(set(pids)) == 5
    assert shell.ready_used == 5


def test_same_shell_as_a_fresh_spawn(shell: Shell) -> None:
    probe = (
        'echo "$0|$#|$*|$-|$PWD"; shopt -p | md5sum; trap -p | grep -c EXIT; '
        # Counted from a subshell: a pipeline's own pipe ends sit in the shell
        # for a moment, which made a direct count racy.
        'echo "fds $(ls /proc/$$/fd | wc -l)"'
    )
    run(shell, "true")
    ready(shell)
    ahead, _ = run(shell, probe)
    assert shell.ready_used == 1
    shell.start_ahead = False
    ready_before = shell.ready_used
    fresh, _ = run(shell, probe)
    assert shell.ready_used == ready_before
    assert ahead == fresh


def test_a_killed_shell_is_replaced(shell: Shell) -> None:
    run(shell, "true")
    for victim in spares(shell):
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait()
    used = shell.ready_used
    text, fields = run(shell, "echo still here")
    assert text.startswith("still here") and fields["exit_code"] == 0
    assert shell.ready_used == used  # served by a fresh spawn
    ready(shell)  # and the next one is started ahead again
    run(shell, "true")
    assert shell.ready_used == used + 1


def test_a_stopped_shell_never_answers(shell: Shell) -> None:
    run(shell, "true")
    wedged = spares(shell)
    for spare in wedged:
        os.kill(spare.proc.pid, signal.SIGSTOP)
    time.sleep(0.05)
    # Handed to a stopped shell, the call would end in its timeout (124).
    text, fields = run(shell, "echo $$", timeout=5_000)
    assert fields["exit_code"] == 0
    assert int(text.splitlines()[0]) not in {spare.proc.pid for spare in wedged}
    for spare in wedged:
        assert not alive(spare.proc.pid)  # discarded: stopped shells are killed


def test_a_planted_command_is_never_run(shell: Shell, tmp_path: Path) -> None:
    run(shell, "true")
    marker = tmp_path / "w" / "pwned"
    # What a process of the sandbox user could do through /proc before the call.
    for target in spares(shell):
        with open(f"/proc/{target.proc.pid}/fd/{target.command_fd}", "wb") as fh:
            fh.write(f"touch {marker}\0".encode() + b" " * 4096)
    text, _ = run(shell, "echo mine")
    assert text.startswith("mine\n")
    assert not marker.exists()
    assert shell.ready_used == 1


def test_timeout_kills_the_group_of_a_shell_started_ahead(shell: Shell) -> None:
    run(shell, "true")
    ready(shell)
    _, fields = run(shell, "sleep 30 & echo $! > child; sleep 30", timeout=1_000)
    assert fields["timed_out"] is True and fields["exit_code"] == 124
    child = int((Path(shell.workdir) / "child").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)
    assert shell.ready_used == 1


def test_state_moved_on_means_a_fresh_shell(shell: Shell, tmp_path: Path) -> None:
    (tmp_path / "w" / "a").mkdir()
    run(shell, "cd a")
    ready(shell)
    used = shell.ready_used
    text, _ = run(shell, "pwd", workdir=str(tmp_path))
    assert text.splitlines()[0] == str(tmp_path)
    assert shell.ready_used == used
    # The saved folder removed and made again: the shell waiting in the old one is not used.
    ready(shell)
    os.rmdir(tmp_path / "w" / "a")
    (tmp_path / "w" / "a").mkdir()
    (tmp_path / "w" / "a" / "new").write_text("x")
    text, _ = run(shell, "ls")
    assert text.splitlines()[0] == "new"
    assert shell.ready_used == used


def test_close_stops_the_waiting_shell(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    s = Shell(str(tmp_path / "w"), str(tmp_path / "s"))
    s.run({"command": "true"}, threading.Event())
    s.run({"command": "true"}, threading.Event())
    pids = [spare.proc.pid for spare in spares(s)]
    assert len(pids) == 2  # calls back to back: two were kept
    s.close()
    assert not any(alive(pid) for pid in pids)


def test_off_switch(shell: Shell) -> None:
    shell.start_ahead = False
    for _ in range(3):
        run(shell, "true")
    time.sleep(0.1)
    assert shell._ready == [] and shell.ready_used == 0


def test_back_to_back_calls_keep_two_shells_and_paced_calls_one(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bash, "KEEP_TWO_S", 0.3)
    run(shell, "true")
    assert len(spares(shell)) == 1  # the first call came after nothing
    run(shell, "true")
    two = spares(shell)
    assert len(two) == 2
    # Back to back, each call finds a shell that has had a whole call to start.
    for _ in range(3):
        oldest = ready(shell)
        text, _ = run(shell, "echo $$")
        assert int(text.splitlines()[0]) == oldest.proc.pid
    time.sleep(0.15)
    run(shell, "true")  # after a pause, still within KEEP_TWO_S of the burst
    assert len(spares(shell)) == 2
    time.sleep(0.35)
    before = spares(shell)
    run(shell, "true")  # paced: one is enough again
    after = spares(shell)
    assert len(after) == 1 and after[0] is before[1]
    assert not alive(before[0].proc.pid)  # served this call and exited
    assert shell.ready_used == 6

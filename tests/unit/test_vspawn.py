"""``executor.vspawn``: a child started by posix_spawn of setpriv is the child
Popen's fork made (ids, session, descriptors, signals, folder, environment).

Here the ids are the test's own (setpriv may always set the ids one has); the
sandbox user's are checked in the Docker tier (tests/hostile/test_privsep.py).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sandboxd.executor import vspawn

pytestmark = pytest.mark.skipif(vspawn.setpriv() is None, reason="no setpriv on this host")

PROBE = (
    "grep -E '^(Uid|Gid|Groups|Cap[A-Za-z]+|NoNewPrivs|Sig(Blk|Ign)):' /proc/$$/status; "
    "read -r -a st < /proc/$$/stat; "
    'echo "pgid=$(( st[4] == $$ )) sid=$(( st[5] == $$ ))"; umask; pwd; echo "$0 $1 [$A]"; '
    "ls -l /proc/$$/fd"
)


def _run(cls: type[subprocess.Popen[bytes]], folder: Path, *, session: bool) -> str:
    kept = os.memfd_create("kept", os.MFD_CLOEXEC)
    # Open but not passed: must not reach the child.
    stray = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(stray, True)
    try:
        proc = cls(
            ["bash", "-c", PROBE, "name", str(kept)],
            cwd=str(folder),
            env={"PATH": os.environ.get("PATH", os.defpath), "A": "b c"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=session,
            close_fds=True,
            pass_fds=(kept,),
            user=os.getuid(),
            group=os.getgid(),
        )
        out, _ = proc.communicate(timeout=30)
    finally:
        os.close(kept)
        os.close(stray)
    assert proc.returncode == 0, out
    return out.decode()


def _in_thread(mask: set[signal.Signals], run: Callable[[], str]) -> str:
    """``run`` on a fresh thread whose signal mask is exactly ``mask``."""
    out: list[str] = []

    def body() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        out.append(run())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert out, "the spawn failed on its thread"
    return out[0]


STARTERS: dict[str, type[subprocess.Popen[bytes]]] = {
    "popen": subprocess.Popen,
    "vspawn": vspawn.UserPopen,
}


def _fresh(starter: str, blocked: set[signal.Signals], *probe: str) -> str:
    """A probe's output, started by ``starter`` from a thread that blocks
    exactly ``blocked``, in a fresh interpreter.

    Popen's fork (it never vforks when asked for ids) runs the at-fork
    handlers of every library the test process has loaded: once in CI,
    grpc's (threads left by earlier tests) skipped its own and the forked
    child printed nothing. A fresh interpreter has only this module's imports.
    """
    names = ",".join(sig.name for sig in blocked)
    done = subprocess.run(
        [sys.executable, "-m", __name__, starter, names, *probe],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _probe_here(starter: str, names: str, probe: list[str]) -> str:
    blocked = {signal.Signals[name] for name in names.split(",") if name}
    cls = STARTERS[starter]
    if probe[0] == "mask":
        return _in_thread(blocked, lambda: str(_own_mask(cls)))
    return _in_thread(blocked, lambda: _run(cls, Path(probe[1]), session=probe[2] == "1"))


@pytest.mark.parametrize("session", [True, False])
def test_same_child_as_popen(tmp_path: Path, session: bool) -> None:
    # Both from a thread that blocks nothing (as the executor's threads), so
    # neither inherits whatever the test runner's thread blocks.
    child = ("child", str(tmp_path), "1" if session else "0")
    forked = _fresh("popen", set(), *child)
    spawned = _fresh("vspawn", set(), *child)
    # glibc's posix_spawn leaves its own internal signals (32, 33) ignored in
    # the child; no program can use them (SIGRTMIN is 34).
    internal = 0b11 << 31

    def masked(text: str) -> list[str]:
        out = []
        for line in text.splitlines():
            if line.startswith("SigBlk:"):
                # bash's own mask while it forks the probe's grep (it blocks
                # CHLD, INT and TERM around a fork): racy, so compared below
                # on processes that do nothing else.
                continue
            if line.startswith("SigIgn:"):
                line = f"SigIgn: {int(line.split()[1], 16) & ~internal:x}"
            # Pipes and the listing's date differ between two runs.
            line = re.sub(r"^.* (\d+ -> )", r"\1", line)
            out.append(re.sub(r"pipe:\[\d+\]|/proc/\d+/", "N", line))
        return out

    assert masked(spawned) == masked(forked)
    assert f"pgid={int(session)} sid={int(session)}" in spawned
    assert f"{tmp_path}" in spawned.splitlines() and "name" in spawned and "[b c]" in spawned
    fds = dict(re.findall(r" (\d+) -> (.*)$", spawned, re.M))
    assert sorted(fds, key=int)[:3] == ["0", "1", "2"], spawned
    assert fds["0"] == "/dev/null" and fds["1"] == fds["2"], spawned
    assert "/memfd:kept (deleted)" in fds.values() and os.devnull not in list(fds.values())[1:]


def test_spawn_errors_are_raised_like_popens(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    with pytest.raises(FileNotFoundError) as err:
        vspawn.UserPopen(["true"], cwd=str(missing), user=os.getuid(), group=os.getgid())
    assert err.value.filename == str(missing)


def test_runnable_checks_the_program(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("not a program")
    assert vspawn.runnable("bash", None)
    assert not vspawn.runnable("no-such-program-sbx", None)
    assert not vspawn.runnable(str(plain), None)
    assert not vspawn.runnable(str(tmp_path), None)
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    # A relative path from the folder the child starts in, not the executor's.
    assert vspawn.runnable("./tool", None, str(tmp_path))
    assert not vspawn.runnable("./tool", None, str(plain.parent / "elsewhere"))


def _own_mask(cls: type[subprocess.Popen[bytes]]) -> int:
    """The blocked-signal mask a child of ``cls`` starts with, as it sees it."""
    proc = cls(
        ["grep", "^SigBlk:", "/proc/self/status"],
        env={"PATH": os.environ.get("PATH", os.defpath)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        close_fds=True,
        user=os.getuid(),
        group=os.getgid(),
    )
    out, _ = proc.communicate(timeout=30)
    return int(out.split()[1], 16)


def test_child_starts_with_the_mask_popen_gives_from_a_thread_that_blocks_nothing() -> None:
    forked = _fresh("popen", set(), "mask")
    spawned = _fresh("vspawn", set(), "mask")
    assert spawned == forked == "0"


def test_child_blocks_no_signal_whatever_the_caller_blocks() -> None:
    # Popen's child inherits the caller thread's mask (SIGTERM blocked here
    # would outlive exec and a timeout's SIGTERM); the spawned child starts
    # with an empty one.
    caller = {signal.SIGTERM, signal.SIGINT}
    assert _fresh("popen", caller, "mask") != "0"
    assert _fresh("vspawn", caller, "mask") == "0"


if __name__ == "__main__":
    # The child side of ``_fresh``.
    sys.stdout.write(_probe_here(sys.argv[1], sys.argv[2], sys.argv[3:]))

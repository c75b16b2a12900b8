"""Landlock domains per started process (executor.isolation), on this host's
kernel: another domain cannot trace or reach /proc/<pid> of the process,
its own domain can, and the domain restricts nothing else (renames across
folders, signals)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxd.executor import isolation

pytestmark = pytest.mark.unit

#: The sandbox user's processes, as in a workspace (root with CAP_SYS_PTRACE
#: may read another domain's /proc/<pid>/environ; the workload has no capability).
USER = 1000
#: A python the sandbox user may run (the checkout's virtualenv may sit in a
#: folder it cannot enter).
PYTHON = "/usr/bin/python3"

if isolation.abi() < isolation.MIN_ABI:  # pragma: no cover - the dev host has ABI 7
    pytest.skip(f"no Landlock ABI {isolation.MIN_ABI} here", allow_module_level=True)

PROBE = textwrap.dedent(
    """
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    target = int(sys.argv[1])
    attach = libc.ptrace(16, target, None, None)  # PTRACE_ATTACH
    print("attach", "ok" if attach == 0 else os.strerror(ctypes.get_errno()))
    if attach == 0:
        os.waitpid(target, 0x40000000)
        libc.ptrace(17, target, None, None)  # PTRACE_DETACH
    for name in ("environ", "mem"):
        try:
            open(f"/proc/{target}/{name}", "rb").close()
            print(name, "ok")
        except OSError as exc:
            print(name, exc.strerror)
    """
)


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    proc = isolation.in_own_domain(lambda: subprocess.Popen(["sleep", "30"], user=USER))
    yield proc
    proc.kill()
    proc.wait()


def _probe(target: int, *, domain: bool) -> list[str]:
    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [PYTHON, "-c", PROBE, str(target)], stdout=subprocess.PIPE, text=True, user=USER
        )

    proc = isolation.in_own_domain(start) if domain else start()
    out, _ = proc.communicate(timeout=30)
    return out.splitlines()


def test_another_domain_cannot_trace_or_open_proc(victim: subprocess.Popen[bytes]) -> None:
    assert isolation.active()
    assert _probe(victim.pid, domain=True) == [
        "attach Operation not permitted",
        "environ Permission denied",
        "mem Permission denied",
    ]
    # Outside any domain (the executor's place) it still can.
    assert _probe(victim.pid, domain=False) == ["attach ok", "environ ok", "mem ok"]


def test_a_domain_traces_its_own_children() -> None:
    script = textwrap.dedent(
        """
        import subprocess, sys
        child = subprocess.Popen(["sleep", "30"])
        out = subprocess.run([sys.executable, "-c", sys.argv[1], str(child.pid)],
                             capture_output=True, text=True).stdout
        child.kill()
        print(out, end="")
        """
    )

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [PYTHON, "-c", script, PROBE], stdout=subprocess.PIPE, text=True, user=USER
        )

    out, _ = isolation.in_own_domain(start).communicate(timeout=30)
    assert out.splitlines() == ["attach ok", "environ ok", "mem ok"]


@pytest.fixture
def user_folder() -> Iterator[Path]:
    """A folder the sandbox user owns and can reach (pytest's tmp_path is root's, 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="sandboxd-isolation-", dir="/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def test_the_domain_restricts_no_file_work_and_no_signal(
    user_folder: Path, victim: subprocess.Popen[bytes]
) -> None:
    tmp_path = user_folder
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    for path in (tmp_path, tmp_path / "a", tmp_path / "b", tmp_path / "a" / "f"):
        os.chown(path, USER, USER)
    script = (
        "import os, sys, signal; "
        "os.rename(sys.argv[1] + '/a/f', sys.argv[1] + '/b/f'); "
        "os.link(sys.argv[1] + '/b/f', sys.argv[1] + '/a/g'); "
        "os.mkfifo(sys.argv[1] + '/fifo'); "
        "os.kill(int(sys.argv[2]), signal.SIGTERM)"
    )
    proc = isolation.in_own_domain(
        lambda: subprocess.Popen([PYTHON, "-c", script, str(tmp_path), str(victim.pid)], user=USER)
    )
    assert proc.wait(30) == 0
    assert (tmp_path / "b" / "f").read_text() == "x" and (tmp_path / "a" / "g").exists()
    assert victim.wait(10) == -signal.SIGTERM


def test_mode_says_why_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isolation.mode() == "landlock"
    monkeypatch.setattr(isolation, "enabled", False)
    assert isolation.mode() == "off: allow_ptrace" and not isolation.active()


def test_a_start_failure_reaches_the_caller() -> None:
    def fails() -> None:
        raise FileNotFoundError(2, "no such program")

    with pytest.raises(FileNotFoundError):
        isolation.in_own_domain(fails)
    assert os.getpid() > 0  # the caller's thread is unrestricted: it goes on

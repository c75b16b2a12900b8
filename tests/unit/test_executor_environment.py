"""The executor's environment is not the sandbox's (issue 23, item 2): what the
daemon puts in the container, where setpriv is found, and where the sandbox's
env goes (hello -> the workload only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandboxd.executor import environment
from sandboxd.executor.dispatch import Executor

pytestmark = pytest.mark.unit


def test_only_the_executor_switches_reach_the_container() -> None:
    options_env = {
        "PATH": "/workspace/.venv/bin:/usr/bin",
        "LD_PRELOAD": "/workspace/x.so",
        "PYTHONPATH": "/workspace",
        "SANDBOXD_BASH_AHEAD": "0",
        "SANDBOXD_GREP_ENGINE": "python",
        "SANDBOXD_SPAWN_VFORK": "0 ; rm -rf /",
        "SANDBOXD_TOKEN": "x",
    }
    assert environment.container_env(options_env) == {
        "SANDBOXD_BASH_AHEAD": "0",
        "SANDBOXD_GREP_ENGINE": "python",
    }


def test_a_program_is_trusted_only_when_root_alone_can_change_it(tmp_path: Path) -> None:
    assert os.geteuid() == 0, "the unit tier runs as root on the development machine"
    assert environment.trusted("/usr/bin/env")
    folder = tmp_path / "bin"
    folder.mkdir()
    os.chmod(tmp_path, 0o755)
    program = folder / "setpriv"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    # tmp_path's ancestors (/tmp is 1777) are writable by others.
    assert not environment.trusted(str(program))
    assert environment.system_program("setpriv", (str(folder),)) is None
    assert environment.system_program("env") in ("/usr/bin/env", "/bin/env")
    assert environment.system_program("no-such-program-here") is None


def _program_in(folder: Path) -> Path:
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    program = folder / "tool"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    return program


def _remove(folder: Path) -> None:
    for child in folder.iterdir():
        child.unlink()
    folder.rmdir()


def test_trust_checks_owner_mode_and_every_folder() -> None:
    # /var/tmp is 1777: a sticky, world-writable folder on the way is not root's alone.
    shared = Path("/var/tmp") / f"sandboxd-trust-{os.getpid()}"
    try:
        assert not environment.trusted(str(_program_in(shared)))
    finally:
        _remove(shared)
    owned = Path("/usr/local/lib") / f"sandboxd-trust-{os.getpid()}"
    try:
        program = _program_in(owned)
        assert environment.trusted(str(program))
        program.chmod(0o775)  # group-writable
        assert not environment.trusted(str(program))
        program.chmod(0o755)
        os.chown(program, 1000, 1000)  # not root's
        assert not environment.trusted(str(program))
        os.chown(program, 0, 0)
        program.chmod(0o644)  # not executable
        assert not environment.trusted(str(program))
        program.chmod(0o755)
        link = owned / "link"
        link.symlink_to(program)
        assert environment.trusted(str(link))  # judged where it resolves
        os.chmod(owned, 0o777)  # a writable folder on the way
        assert not environment.trusted(str(link))
    finally:
        _remove(owned)


def test_the_sandbox_env_from_hello_is_the_workloads(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    ex = Executor(str(work), state_dir=str(tmp_path / "state"), base_env={"HOME": "/tmp/home"})
    ex.handle("hello", {"env": {"PATH": "/usr/bin:/bin", "GREETING": "hi"}})
    assert ex.base_env == {"HOME": "/tmp/home", "PATH": "/usr/bin:/bin", "GREETING": "hi"}
    # The executor's own environment is untouched.
    assert ex.start_env == {"HOME": "/tmp/home"}
    out = ex.handle("exec", {"argv": ["sh", "-c", "echo $GREETING"]})
    assert out["stdout"] == b"hi\n"
    tool = ex.handle("tool", {"name": "bash", "args": {"command": "echo $GREETING $HOME"}})
    assert tool["text"].startswith("hi /tmp/home\n"), tool
    # A re-attaching daemon restates it; the executor keeps one, not a merge of both.
    ex.handle("hello", {"env": {"PATH": "/usr/bin:/bin"}})
    assert "GREETING" not in ex.base_env

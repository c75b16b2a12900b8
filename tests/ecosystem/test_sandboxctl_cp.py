"""sandboxctl cp (both directions, files and folders) and sandboxctl fork."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sandboxd.ctl.app import app
from tests.helpers import Daemon

pytestmark = pytest.mark.inproc


@pytest.fixture
def ctl(local_daemon: Daemon) -> CliRunner:
    return CliRunner(env={"SANDBOXD_TARGET": local_daemon.target, "SANDBOXD_TOKEN": None})


@pytest.fixture
def instance(ctl: CliRunner) -> str:
    name = f"cp-{secrets.token_hex(3)}"
    assert ctl.invoke(app, ["create", name]).exit_code == 0
    return name


def test_cp_folder_in_and_out(ctl: CliRunner, instance: str, tmp_path: Path) -> None:
    source = tmp_path / "repo"
    (source / "src").mkdir(parents=True)
    (source / "src/main.py").write_text("print('hi')\n")
    (source / "run.sh").write_text("#!/bin/sh\n")
    (source / "run.sh").chmod(0o755)
    os.symlink("src/main.py", source / "entry")
    result = ctl.invoke(app, ["cp", str(source), f"{instance}:repo"])
    assert result.exit_code == 0, result.output
    assert "2 files, 1 links" in result.output
    back = tmp_path / "back"
    result = ctl.invoke(app, ["cp", f"{instance}:repo", str(back)])
    assert result.exit_code == 0, result.output
    assert (back / "src/main.py").read_text() == "print('hi')\n"
    assert os.readlink(back / "entry") == "src/main.py"
    assert (back / "run.sh").stat().st_mode & 0o777 == 0o755


def test_cp_file_in_and_out(ctl: CliRunner, instance: str, tmp_path: Path) -> None:
    local = tmp_path / "data.bin"
    local.write_bytes(os.urandom(3 << 20))
    result = ctl.invoke(app, ["cp", str(local), f"{instance}:in/data.bin"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    out.mkdir()
    result = ctl.invoke(app, ["cp", f"{instance}:in/data.bin", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "data.bin").read_bytes() == local.read_bytes()


def test_cp_needs_exactly_one_sandbox_side(ctl: CliRunner, tmp_path: Path) -> None:
    result = ctl.invoke(app, ["cp", str(tmp_path), str(tmp_path / "x")])
    assert result.exit_code == 2
    missing = ctl.invoke(app, ["cp", f"{tmp_path}/nope", "agent:x"])
    assert missing.exit_code == 2 and "no such local file" in missing.output


def test_fork(ctl: CliRunner, instance: str, tmp_path: Path) -> None:
    local = tmp_path / "f.txt"
    local.write_text("v1")
    assert ctl.invoke(app, ["cp", str(local), f"{instance}:f.txt"]).exit_code == 0
    result = ctl.invoke(app, ["fork", instance, f"{instance}-b"])
    assert result.exit_code == 0, result.output
    assert "forked" in result.output
    again = ctl.invoke(app, ["fork", instance, f"{instance}-b"])
    assert again.exit_code == 125 and "AlreadyExists" in again.output
    result = ctl.invoke(app, ["cp", f"{instance}-b:f.txt", str(tmp_path / "g.txt")])
    assert (tmp_path / "g.txt").read_text() == "v1"

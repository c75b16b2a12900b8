"""sandboxctl through typer's CliRunner (in-process) and as a real subprocess."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sandboxd.ctl.app import app
from tests.helpers import ROOT, Daemon

pytestmark = pytest.mark.inproc


@pytest.fixture
def ctl(local_daemon: Daemon) -> CliRunner:
    return CliRunner(env={"SANDBOXD_TARGET": local_daemon.target, "SANDBOXD_TOKEN": None})


@pytest.fixture
def instance(ctl: CliRunner) -> str:
    name = f"ctl-{secrets.token_hex(3)}"
    assert ctl.invoke(app, ["create", name]).exit_code == 0
    return name


def test_status_shows_pool_and_health(ctl: CliRunner) -> None:
    result = ctl.invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert "backend" in result.stdout and "local" in result.stdout
    assert result.stdout.count("SERVING") == 2

    data = json.loads(ctl.invoke(app, ["status", "--json"]).stdout)
    assert data["backend"] == "local"
    assert set(data["pool"]) == {"size", "ready", "served", "started"}
    assert data["health"] == {"": "SERVING", "sandboxd.v1.SandboxService": "SERVING"}

    assert ctl.invoke(app, ["health"]).stdout.strip() == "SERVING"


def test_create_list_delete(ctl: CliRunner) -> None:
    name = f"ctl-{secrets.token_hex(3)}"
    first = ctl.invoke(app, ["create", name])
    assert first.exit_code == 0 and first.stdout.startswith(f"created {name}")
    again = ctl.invoke(app, ["create", name, "--json"])
    assert json.loads(again.stdout)["created"] is False

    listed = json.loads(ctl.invoke(app, ["list", "--json"]).stdout)
    assert name in [entry["instance_id"] for entry in listed]
    assert name in ctl.invoke(app, ["list"]).stdout

    assert ctl.invoke(app, ["delete", name]).stdout.strip() == f"deleted {name}"
    gone = ctl.invoke(app, ["info", name])
    assert gone.exit_code == 125
    assert "NotFound" in gone.stderr


def test_the_six_tools(ctl: CliRunner, instance: str) -> None:
    def tool(*args: str, code: int = 0) -> str:
        result = ctl.invoke(app, [args[0], instance, *args[1:]])
        assert result.exit_code == code, result.output
        return result.stdout

    assert tool("write", "app.py", "x = 1\nprint(x)\n") == "Created app.py (2 lines, 15 bytes).\n"
    assert tool("read", "app.py", "--limit", "1") == (
        "     1\tx = 1\n\n[Showing lines 1-1 of 2. Use offset=2 to read more.]\n"
    )
    assert tool("edit", "app.py", "x = 1", "x = 2").startswith("Edited app.py")
    assert tool("bash", "python3 app.py") == "2\n\nExit code: 0\n"
    assert tool("grep", "print", "-o", "content") == "app.py:2:print(x)\n"
    assert tool("glob", "*.py") == "app.py\n"
    # Raw arguments as a model sends them; sandboxd takes the alias.
    assert tool("call", "read", '{"path": "app.py", "offset": "2"}') == "     2\tprint(x)\n"
    # A tool's error result: its text, exit status 1.
    assert tool("bash", "exit 4", code=1).endswith("Exit code: 4\n")
    assert tool("read", "missing.py", code=1).startswith("Error: ")
    result = json.loads(tool("bash", "echo hi", "--json"))
    assert result["fields"]["exit_code"] == 0 and result["is_error"] is False

    bad = ctl.invoke(app, ["call", instance, "read", "{not json"])
    assert bad.exit_code == 2 and "not JSON" in bad.stderr


def test_write_reads_stdin(ctl: CliRunner, instance: str) -> None:
    result = ctl.invoke(app, ["write", instance, "notes.txt"], input="from stdin\n")
    assert result.exit_code == 0, result.output
    assert ctl.invoke(app, ["read", instance, "notes.txt"]).stdout == "     1\tfrom stdin\n"


def test_exec_keeps_streams_and_exit_status(ctl: CliRunner, instance: str) -> None:
    result = ctl.invoke(app, ["exec", instance, "--", "sh", "-c", "echo out; echo err >&2; exit 7"])
    assert result.exit_code == 7
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"

    shell = ctl.invoke(
        app, ["exec", instance, "-s", "-e", "WHO=ctl", "--", "echo $WHO | tr a-z A-Z"]
    )
    assert (shell.exit_code, shell.stdout) == (0, "CTL\n")

    slow = ctl.invoke(app, ["exec", instance, "--timeout-ms", "1000", "--", "sleep", "10"])
    assert slow.exit_code == 124


def test_exec_streams_output_as_produced(local_daemon: Daemon, tmp_path: Path) -> None:
    name = f"ctl-{secrets.token_hex(3)}"
    base = [sys.executable, "-m", "sandboxd.ctl", "--target", local_daemon.target]
    subprocess.run([*base, "create", name], check=True, cwd=ROOT, capture_output=True)
    # The command waits (up to 30 s) for a file the test writes only once it
    # has read the first line: a handshake, not a timing bound, so a slow
    # start of sandboxctl under load proves nothing either way.
    script = (
        "echo first; i=0; until [ -e go ] || [ $i -ge 600 ]; do sleep 0.05; i=$((i+1)); done; "
        "echo second; exit 3"
    )
    proc = subprocess.Popen(
        [*base, "exec", name, "--", "sh", "-c", script], stdout=subprocess.PIPE, cwd=ROOT
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"first\n"
    # The first line came while the command was still waiting for us.
    assert proc.poll() is None
    subprocess.run([*base, "write", name, "go", "x"], check=True, cwd=ROOT, capture_output=True)
    assert proc.stdout.read() == b"second\n"
    assert proc.wait(timeout=30) == 3
    subprocess.run([*base, "delete", name], check=True, cwd=ROOT, capture_output=True)


def test_unreachable_daemon(tmp_path: Path) -> None:
    ctl = CliRunner(env={"SANDBOXD_TARGET": f"unix://{tmp_path}/none.sock"})
    status = ctl.invoke(app, ["status"])
    assert status.exit_code == 1
    assert "UNREACHABLE" in status.stderr
    listed = ctl.invoke(app, ["list"])
    assert listed.exit_code == 125
    assert "SandboxUnavailable" in listed.stderr
    assert ctl.invoke(app, ["health"]).exit_code == 1


def test_snapshots_extend_and_max_lifetime(ctl: CliRunner, instance: str) -> None:
    def ok(*args: str) -> str:
        result = ctl.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    ok("write", instance, "f.txt", "one\n")
    assert ok("snapshot", "create", instance, "v1").startswith(
        f"snapshot v1 of {instance}: 4 bytes"
    )
    ok("write", instance, "f.txt", "two\n")
    assert ok("snapshot", "restore", instance, "v1").startswith(f"restored {instance} from v1")
    assert ok("read", instance, "f.txt") == "     1\tone\n"
    listed = json.loads(ok("snapshot", "list", "--json"))
    assert [(s["name"], s["source_id"], s["size_bytes"]) for s in listed] == [("v1", instance, 4)]
    copy = f"{instance}-c"
    made = json.loads(
        ok("create", copy, "--from-snapshot", "v1", "--max-lifetime", "600", "--json")
    )
    assert made["sandbox"]["instance_id"] == copy
    assert made["sandbox"]["expires_at_ms"] > 0
    assert ok("read", copy, "f.txt") == "     1\tone\n"
    assert ok("extend", copy, "60").startswith(f"{copy} ends ")
    assert ok("snapshot", "delete", "v1").strip() == "deleted snapshot v1"
    gone = ctl.invoke(app, ["snapshot", "restore", instance, "v1"])
    assert gone.exit_code == 125 and "no snapshot named 'v1'" in gone.stderr
    ok("delete", copy)


def test_template_commands_say_what_the_engine_cannot(
    ctl: CliRunner, tmp_path: Path, instance: str
) -> None:
    """The local backend has no templates: both commands exit 125 with its
    reason, nothing on stdout; a folder that is not there is typer's error."""
    (tmp_path / "Dockerfile").write_text("FROM sandboxd-workspace:latest\n")
    built = ctl.invoke(app, ["template", "build", str(tmp_path)])
    assert built.exit_code == 125 and built.stdout == ""
    assert "templates" in built.stderr and "local" in built.stderr
    assert ctl.invoke(app, ["snapshot", "create", instance, "t"]).exit_code == 0
    made = ctl.invoke(app, ["template", "from-snapshot", "t"])
    assert made.exit_code == 125 and "templates" in made.stderr
    missing = ctl.invoke(app, ["template", "from-snapshot", "nope"])
    assert missing.exit_code == 125 and "no snapshot named 'nope'" in missing.stderr
    assert ctl.invoke(app, ["template", "build", str(tmp_path / "absent")]).exit_code == 2
    assert ctl.invoke(app, ["snapshot", "delete", "t"]).exit_code == 0


def test_network_flags_net_set_and_net_log(ctl: CliRunner, local_daemon: Daemon) -> None:
    name = f"ctl-{secrets.token_hex(3)}"
    made = ctl.invoke(
        app, ["create", name, "--allow", "pypi.org", "--deny", "x.pypi.org", "--json"]
    )
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["options"]["network"] == {
        "mode": "allow", "allow": ["pypi.org"], "deny": ["x.pypi.org"],
    }  # fmt: skip
    assert "allow" in ctl.invoke(app, ["list"]).stdout  # the NETWORK column
    changed = ctl.invoke(app, ["net", "set", name, "--allow", "files.pythonhosted.org:443"])
    assert changed.exit_code == 0, changed.output
    assert "network allow" in changed.stdout and "files.pythonhosted.org:443" in changed.stdout
    bad = ctl.invoke(app, ["net", "set", name, "--allow", "pypi.org:x"])
    assert bad.exit_code == 125 and "network rule 'pypi.org:x'" in bad.stderr
    to_full = ctl.invoke(app, ["net", "set", name, "--network", "full"])
    assert to_full.exit_code == 125 and "cannot change from mode 'allow'" in to_full.stderr
    assert ctl.invoke(app, ["net", "set", name]).exit_code != 0  # nothing to set
    empty = ctl.invoke(app, ["net", "log", name])
    assert empty.exit_code == 0 and "no egress decisions kept" in empty.stderr
    full = ctl.invoke(app, ["create", f"{name}-full", "--network", "full"])
    assert full.exit_code == 0 and "warning: network mode 'full'" in full.stderr
    for each in (name, f"{name}-full"):
        assert ctl.invoke(app, ["delete", each]).exit_code == 0

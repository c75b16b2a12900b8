"""bash_output / kill_shell edge cases the conformance cases cannot set up.

(The model-facing texts themselves are conformance cases, run on every backend.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_client.sandbox_tools import SCHEMAS
from sandboxd.contract.tools import TOOL_NAMES
from sandboxd.executor.tools import ToolSession
from sandboxd.executor.tools import bash as bash_tool
from sandboxd.executor.tools import jobs as jobs_tool

pytestmark = pytest.mark.unit


@pytest.fixture
def tools(tmp_path: Path) -> Iterator[ToolSession]:
    session = ToolSession(str(tmp_path / "w"), state_dir=str(tmp_path / "s"))
    yield session
    session.close()


def _start(tools: ToolSession, command: str) -> dict[str, object]:
    result = tools.run("bash", {"command": command, "run_in_background": True})
    fields = result["fields"]
    assert isinstance(fields, dict)
    return fields


def _until_exited(tools: ToolSession, bash_id: str) -> None:
    job = tools.shell.jobs._get(bash_id, "bash_id")
    deadline = time.monotonic() + 20
    while job.proc.poll() is None:
        assert time.monotonic() < deadline, "job did not end"
        time.sleep(0.02)


def _fields(result: dict[str, object]) -> dict[str, object]:
    fields = result["fields"]
    assert isinstance(fields, dict)
    return fields


def test_schemas_name_the_executor_parameters() -> None:
    """The schemas models see list exactly the parameters the tools accept."""
    specs = {"bash_output": jobs_tool.OUTPUT_SPEC, "kill_shell": jobs_tool.KILL_SPEC}
    for name, spec in specs.items():
        assert name in TOOL_NAMES
        assert set(SCHEMAS[name]["properties"]) == {p.name for p in spec.params}
        assert SCHEMAS[name]["required"] == [p.name for p in spec.params if p.required]


def test_a_split_utf8_character_waits_for_its_end(tools: ToolSession, tmp_path: Path) -> None:
    fields = _start(tools, "touch started; sleep 30")
    job = tools.shell.jobs._get("bash_1", "bash_id")
    # Stand in for the job writing half of "é": the read must not show U+FFFD.
    with open(job.log_path, "ab") as log:
        log.write(b"caf\xc3")
    first = tools.run("bash_output", {"bash_id": "bash_1"})
    assert first["text"] == "caf\n\nStatus: running"
    assert _fields(first)["new_bytes"] == 3
    with open(job.log_path, "ab") as log:
        log.write(b"\xa9!\n")
    second = tools.run("bash_output", {"bash_id": "bash_1"})
    assert second["text"] == "\u00e9!\n\nStatus: running"
    tools.run("kill_shell", {"shell_id": str(fields["bash_id"])})


def test_removed_and_truncated_logs_are_said(tools: ToolSession) -> None:
    _start(tools, "echo 0123456789")
    _until_exited(tools, "bash_1")
    job = tools.shell.jobs._get("bash_1", "bash_id")
    assert tools.run("bash_output", {"bash_id": "bash_1"})["text"].startswith("0123456789")
    with open(job.log_path, "wb") as log:
        log.write(b"new\n")
    text = tools.run("bash_output", {"bash_id": "bash_1"})["text"]
    assert text == (
        "new\n\nStatus: exited (Exit code: 0)\n"
        "[The log was truncated since the last read; reading from its start.]"
    )
    os.unlink(job.log_path)
    gone = tools.run("bash_output", {"bash_id": "bash_1"})
    assert gone["is_error"] is False
    assert "was removed; the job's output is lost." in str(gone["text"])


def test_finished_jobs_are_forgotten_beyond_the_limit(
    tools: ToolSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jobs_tool, "KEEP_FINISHED", 2)
    for n in range(1, 5):
        _start(tools, "true")
        _until_exited(tools, f"bash_{n}")
    _start(tools, "sleep 30")
    result = tools.run("bash_output", {"bash_id": "bash_1"})
    assert result["is_error"] is True
    assert str(result["text"]).endswith(
        "The jobs are: bash_3 (exit code 0), bash_4 (exit code 0), bash_5 (running)."
    )


def test_a_flood_is_read_in_bounded_memory(tools: ToolSession) -> None:
    # 40 MB in one line: bash_output shows a head and tail, never the whole.
    _start(tools, "head -c 40000000 /dev/zero | tr '\\0' x")
    _until_exited(tools, "bash_1")
    result = tools.run("bash_output", {"bash_id": "bash_1", "filter": "x"})
    assert len(str(result["text"])) <= 30_000
    assert _fields(result)["new_bytes"] == 40_000_000
    assert _fields(result)["truncated"] is True


def test_the_background_text_points_at_the_job_tools(tools: ToolSession) -> None:
    result = tools.run("bash", {"command": "true", "run_in_background": True})
    assert 'bash_output (bash_id="bash_1")' in str(result["text"])
    assert 'kill_shell (shell_id="bash_1")' in str(result["text"])
    assert _fields(result)["bash_id"] == "bash_1"


def test_close_stops_running_jobs(tmp_path: Path) -> None:
    session = ToolSession(str(tmp_path / "w"), state_dir=str(tmp_path / "s"))
    pid = _start(session, "sleep 60")["pid"]
    assert isinstance(pid, int)
    session.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_kill_grace_matches_bash(tools: ToolSession) -> None:
    assert jobs_tool.KILL_GRACE == bash_tool.KILL_GRACE

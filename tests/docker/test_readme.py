"""The README's code blocks run, so they cannot rot.

Every ```python and ```sh block of README.md runs against a real daemon (the
docker tier's: real engine, real image), except a block marked on the line
before it with ``<!-- not run: why -->``. A block reaches the daemon as a
user's would: the standard socket path in its text is the test daemon's, and
sandboxctl, ``sandboxd mcp`` and pytest find it through SANDBOXD_TARGET. The
development venv's commands are on PATH. A python block may use top-level
``await`` (as in ``python -m asyncio``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT, Daemon

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

README = ROOT / "README.md"
SOCKET = "unix:///run/sandboxd/sandboxd.sock"
RUNNABLE = ("python", "sh")

_FENCE = re.compile(
    r"(?:^<!-- not run: (?P<why>[^\n]*?) -->\n)?^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
_HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)

# Runs a python block; top-level await allowed.
_PYTHON = """\
import ast, asyncio, sys
source = sys.stdin.read()
code = compile(source, "README.md block", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__"})
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


@dataclass(frozen=True)
class Block:
    name: str
    lang: str
    code: str
    not_run: str | None


def blocks(text: str) -> list[Block]:
    found, seen = [], {}
    for match in _FENCE.finditer(text):
        headings = _HEADING.findall(text, 0, match.start())
        section = re.sub(r"\W+", "-", headings[-1] if headings else "top").strip("-").lower()
        seen[section] = seen.get(section, 0) + 1
        found.append(
            Block(
                name=f"{section}-{seen[section]}",
                lang=match.group("lang"),
                code=match.group("code"),
                not_run=match.group("why"),
            )
        )
    return found


ALL = blocks(README.read_text())
TO_RUN = [b for b in ALL if b.lang in RUNNABLE and b.not_run is None]


def test_every_block_runs_or_says_why_not() -> None:
    for block in ALL:
        if block.not_run is not None:
            assert block.not_run.strip(), f"{block.name}: 'not run' needs a reason"
    assert {b.lang for b in TO_RUN} == set(RUNNABLE)
    assert len(TO_RUN) >= 3, "the README's runnable examples went missing"


@pytest.mark.parametrize("block", TO_RUN, ids=[b.name for b in TO_RUN])
def test_the_block_runs(block: Block, daemon: Daemon, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SANDBOXD_TARGET": daemon.target,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    code = block.code.replace(SOCKET, daemon.target)
    if block.lang == "python":
        command = [sys.executable, "-c", _PYTHON]  # the block on its stdin
    else:
        command, code = ["bash", "-euo", "pipefail", "-c", code], ""
    done = subprocess.run(
        command, input=code, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240
    )
    assert done.returncode == 0, (
        f"{block.name}:\n{block.code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    assert "Traceback" not in done.stderr, done.stderr

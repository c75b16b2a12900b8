"""The published wheel (`make dist`) without extras, in a fresh virtualenv:
the client works against a real daemon and nothing of the server came with it.

The daemon is ``sandboxd serve`` from another fresh virtualenv with the same
wheel and its server extra, so both sides are what a user installs.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.dist import WHEEL, fresh_venv, require_built
from tests.helpers import DAEMON_PYTHON, Daemon

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]

FORBIDDEN = (
    "docker",
    "fastapi",
    "uvicorn",
    "starlette",
    "mcp",
    "typer",
    "rich",
    "prometheus_client",
    "pydantic_settings",
)
# Distribution names of the same (importlib.metadata looks these up).
FORBIDDEN_DISTRIBUTIONS = (
    "docker",
    "fastapi",
    "uvicorn",
    "starlette",
    "mcp",
    "typer",
    "rich",
    "prometheus-client",
    "pydantic-settings",
    "grpcio-health-checking",
    "grpcio-reflection",
    "pydantic",
    "anyio",
    "pydantic-ai-slim",
    "inspect-ai",
    "openai-agents",
    "deepagents",
)


@pytest.fixture(scope="module")
def thin_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_built(WHEEL)
    return fresh_venv(tmp_path_factory.mktemp("thin") / "venv", str(WHEEL))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    require_built(WHEEL)
    folder = tmp_path_factory.mktemp("served")
    server_python = fresh_venv(folder / "venv", f"{WHEEL}[server]", python=DAEMON_PYTHON)
    process = Daemon(
        folder / "sandboxd.sock",
        "--backend", "local",
        "--local-root", str(folder / "root"),
        "--drain-seconds", "2",
        program=[str(server_python.parent / "sandboxd")],
    ).start()  # fmt: skip
    try:
        yield process
    finally:
        process.stop()


CLIENT = """
import asyncio, importlib, importlib.metadata, json, sys

import runtime_client
from runtime_client import GrpcSandboxFactory, NotFound, SandboxOptions

async def main(target):
    async with GrpcSandboxFactory(target, options=SandboxOptions(env={"THIN": "1"})) as factory:
        box = await factory.create_sandbox("thin-client")
        await box.write_file("hello.txt", "from a thin client\\n")
        read = await box.read_file("hello.txt")
        ran = await box.exec("cat hello.txt; echo $THIN")
        tool = await box.bash("ls")
        await box.delete()
        try:
            await box.info()
            gone = False
        except NotFound:
            gone = True
    return {"read": read.data.decode(), "stdout": ran.stdout.decode(), "exit": ran.exit_code,
            "tool": tool.text, "gone": gone}

result = asyncio.run(main(sys.argv[1]))
try:
    from runtime_client import define_tool
    result["agent_error"] = None
except ImportError as exc:
    result["agent_error"] = str(exc)

result["contrib_errors"] = {}
for framework in ("pydantic_ai", "inspect_ai", "openai_agents", "deepagents"):
    try:
        importlib.import_module(f"runtime_client.contrib.{framework}")
        result["contrib_errors"][framework] = None
    except ImportError as exc:
        result["contrib_errors"][framework] = str(exc)

forbidden_modules, forbidden_dists = json.loads(sys.argv[2]), json.loads(sys.argv[3])
installed = []
for name in forbidden_dists:
    try:
        importlib.metadata.distribution(name)
        installed.append(name)
    except importlib.metadata.PackageNotFoundError:
        pass
result["installed"] = installed
result["imported"] = [m for m in forbidden_modules if m in sys.modules]
result["requires"] = sorted(
    r.split(";")[0].strip() for r in importlib.metadata.requires("sandboxd") if "extra ==" not in r
)
print(json.dumps(result))
"""


async def test_base_install_is_a_working_client_without_the_server(
    thin_python: Path, daemon: Daemon
) -> None:
    target = daemon.target
    proc = await anyio.run_process(
        [
            str(thin_python),
            "-I",
            "-c",
            CLIENT,
            target,
            json.dumps(FORBIDDEN),
            json.dumps(FORBIDDEN_DISTRIBUTIONS),
        ],
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    assert result["read"] == "from a thin client\n"
    assert result["stdout"] == "from a thin client\n1\n"
    assert result["exit"] == 0
    assert "hello.txt" in result["tool"]
    assert result["gone"] is True
    assert result["installed"] == []
    assert result["imported"] == []
    assert [r.split(">")[0].split("<")[0] for r in result["requires"]] == ["grpcio", "protobuf"]
    assert "pip install 'sandboxd[agent]'" in result["agent_error"]
    # The framework adapters are there, and say which extra each needs.
    assert result["contrib_errors"] == {
        "pydantic_ai": "runtime_client.contrib.pydantic_ai needs the 'pydantic-ai' extra: "
        "pip install 'sandboxd[pydantic-ai]' (missing: pydantic_ai)",
        "inspect_ai": "runtime_client.contrib.inspect_ai needs the 'inspect-ai' extra: "
        "pip install 'sandboxd[inspect-ai]' (missing: inspect_ai)",
        "openai_agents": "runtime_client.contrib.openai_agents needs the 'openai-agents' "
        "extra: pip install 'sandboxd[openai-agents]' (missing: agents)",
        "deepagents": "runtime_client.contrib.deepagents needs the 'deepagents' extra: "
        "pip install 'sandboxd[deepagents]' (missing: deepagents)",
    }


@pytest.mark.parametrize(
    ("command", "extra"),
    [(["sandboxctl", "list"], "ctl"), (["sandboxd", "serve"], "server")],
)
def test_console_scripts_name_the_missing_extra(
    thin_python: Path, command: list[str], extra: str
) -> None:
    script = thin_python.parent / command[0]
    proc = subprocess.run([str(script), *command[1:]], capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"pip install 'sandboxd[{extra}]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_sandboxd_version_needs_no_extra(thin_python: Path) -> None:
    proc = subprocess.run(
        [str(thin_python.parent / "sandboxd"), "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sandboxd ")

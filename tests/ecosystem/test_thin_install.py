"""`pip install sandboxd` without extras, in a fresh virtualenv: the client
works against a real daemon and nothing of the server came with it.

The daemon runs in this (dev) interpreter; the thin venv's client reaches it
over a unix socket. Wheels are kept in a wheelhouse (SANDBOXD_WHEELHOUSE,
default ~/.cache/sandboxd/wheelhouse) so a rerun installs offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
import venv
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from sandboxd.config import Settings
from sandboxd.grpc.server import Server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]

ROOT = Path(__file__).parents[2]
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
)


def _wheelhouse() -> Path:
    folder = Path(
        os.environ.get("SANDBOXD_WHEELHOUSE", Path.home() / ".cache" / "sandboxd" / "wheelhouse")
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _pip(python: Path, *args: str) -> None:
    subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True
    )


@pytest.fixture(scope="module")
def thin_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("thin")
    # A copy of the sources: building in the worktree would leave build/ behind.
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("sandboxd", "runtime_client"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    venv.EnvBuilder(with_pip=True).create(work / "venv")
    python = work / "venv" / "bin" / "python"
    wheels = _wheelhouse()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    offline = ["--no-index", "--find-links", str(wheels)]
    try:
        _pip(python, "install", *offline, str(source))
    except subprocess.CalledProcessError:
        # First run (or new pins): fill the wheelhouse from PyPI, then install offline.
        _pip(python, "download", "-d", str(wheels), *needed)
        _pip(python, "install", *offline, str(source))
    yield python


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Server]:
    settings = Settings.from_arguments(
        backend="local",
        local_root=tmp_path / "root",
        socket=tmp_path / "sandboxd.sock",
        drain_seconds=2,
    )
    server = Server(settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


CLIENT = """
import asyncio, importlib.metadata, json, sys

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
    thin_python: Path, daemon: Server
) -> None:
    target = f"unix://{daemon.settings.socket}"
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

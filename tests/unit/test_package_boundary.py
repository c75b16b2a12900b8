"""The package boundary, checked in fresh interpreters: the contract package
(every module of it) and the client load nothing but the standard library,
grpcio and protobuf; the executor bundle loads nothing but the standard library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import sandboxd.contract
from sandboxd.executor import bundle

CONTRACT = Path(sandboxd.contract.__file__).parent


def _contract_modules() -> list[str]:
    """Every module of the contract package, found on disk (v1 is a namespace package)."""
    modules = ["sandboxd", "sandboxd.contract"]
    for path in sorted(CONTRACT.rglob("*.py")):
        parts = path.relative_to(CONTRACT).with_suffix("").parts
        if parts[-1] == "__init__":
            continue
        modules.append(".".join(("sandboxd", "contract", *parts)))
    modules += sorted(
        ".".join(("sandboxd", "contract", *d.relative_to(CONTRACT).parts))
        for d in CONTRACT.rglob("*")
        if d.is_dir() and d.name != "__pycache__"
    )
    return modules


CONTRACT_MODULES = _contract_modules()
# Top-level distributions' modules the contract may load besides the standard library.
CONTRACT_DEPENDENCIES = ("grpc", "google")

# What a client imports: each must stay inside the contract package.
CLIENT_IMPORTS = [
    *(f"import {module}" for module in CONTRACT_MODULES),
    "import runtime_client",
    "from runtime_client import GrpcSandboxFactory, LocalSandboxFactory, Sandbox",
    "from runtime_client import SandboxOptions, FileInfo, ExecResult, NotFound, SandboxdError",
    "from runtime_client import ToolSpec, to_openai_chat_tools, to_anthropic_tools",
    "import runtime_client.errors, runtime_client.factories, runtime_client.grpc_transport",
]

# The runtime_client modules the client layer is made of (the rest need an extra).
CLIENT_MODULES = {
    "runtime_client",
    "runtime_client._status",
    "runtime_client.errors",
    "runtime_client.factories",
    "runtime_client.grpc_transport",
    "runtime_client.port_mux",
    "runtime_client.ports",
    "runtime_client.processes",
    "runtime_client.sandbox",
    "runtime_client.schema",
    "runtime_client.tool_stream",
    "runtime_client.transfer_io",
    "runtime_client.transport",
}

_PROBE = """
import json, sys
# grpc and protobuf are the contract's dependencies: whatever they load is
# theirs (grpc itself imports grpc_tools and friends when they are installed).
import grpc, google.protobuf
before = set(sys.modules)
exec(sys.argv[1])
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def _loaded_by(statement: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-I", "-c", _PROBE, statement],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def _outside_contract(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if name.split(".")[0] not in sys.stdlib_module_names
        and name.split(".")[0] not in CONTRACT_DEPENDENCIES
        and name != "sandboxd"
        and name != "sandboxd.contract"
        and not name.startswith("sandboxd.contract.")
        and name not in CLIENT_MODULES
    ]


def test_the_contract_modules_are_found() -> None:
    # The list above is the package's own files, so a new module is checked too.
    assert {"sandboxd.contract.models", "sandboxd.contract.v1.sandbox_pb2_grpc"} <= set(
        CONTRACT_MODULES
    )


@pytest.mark.parametrize("statement", CLIENT_IMPORTS)
def test_client_imports_load_only_the_contract_layer(statement: str) -> None:
    loaded = _loaded_by(statement)
    assert _outside_contract(loaded) == []


def test_the_probe_sees_a_module_outside_the_contract() -> None:
    # The check above is not vacuous: the agent runtime needs pydantic.
    loaded = _loaded_by("from runtime_client import define_tool")
    assert "pydantic" in _outside_contract(loaded)
    assert "runtime_client.tools" in _outside_contract(loaded)


def test_import_runtime_client_loads_nothing_until_a_name_is_used() -> None:
    loaded = _loaded_by("import runtime_client")
    assert [m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names] == [
        "runtime_client"
    ]


_BUNDLE_PROBE = """
import importlib.abc, importlib.util, json, sys
mods = json.loads(sys.stdin.buffer.read())
class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name in mods:
            return importlib.util.spec_from_loader(name, self, is_package=mods[name][0])
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        exec(compile(mods[module.__name__][1], module.__name__, "exec"), module.__dict__)
sys.meta_path.insert(0, Finder())
for name in sorted(mods):
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def test_executor_bundle_imports_only_the_standard_library() -> None:
    # -I -S: no site-packages at all, as in a workspace image; every module of
    # the bundle is imported, then nothing loaded may be outside the stdlib.
    # The sources only: the bytecode the bootstrap may load instead is
    # compiled from the same sources (tests/unit/test_bundle.py).
    blob = bundle.bundle_blob(bytecode=False)
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _BUNDLE_PROBE],
        input=blob,
        capture_output=True,
        check=True,
    )
    loaded = json.loads(proc.stdout)
    shipped = set(json.loads(blob))
    assert "sandboxd.executor.main" in loaded
    outside = [
        name
        for name in loaded
        if name.split(".")[0] not in sys.stdlib_module_names
        and name not in shipped
        and name != "__main__"
    ]
    assert outside == []


def test_bundle_probe_fails_on_a_third_party_import() -> None:
    # The same probe on a bundle that imports pydantic fails: -S hides site-packages.
    blob = json.dumps({"sandboxd": [True, ""], "sandboxd.bad": [False, "import pydantic"]})
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _BUNDLE_PROBE],
        input=blob.encode(),
        capture_output=True,
    )
    assert proc.returncode != 0
    assert b"No module named 'pydantic'" in proc.stderr


def test_a_local_daemon_without_http_loads_neither_docker_nor_fastapi(tmp_path: Path) -> None:
    # sandboxd.daemon.assembly imports each backend and the HTTP app only when chosen.
    statement = (
        "from sandboxd.daemon.settings import Settings\n"
        "from sandboxd.daemon.assembly import Daemon\n"
        f"Daemon(Settings.from_arguments(backend='local', local_root={str(tmp_path)!r}, "
        f"socket={str(tmp_path / 's.sock')!r}))\n"
    )
    loaded = _loaded_by(statement)
    assert "sandboxd.backends.local.backend" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("docker", "fastapi", "uvicorn")] == []

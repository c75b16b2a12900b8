"""ARCHITECTURE.md is the tree, and the import contracts hold it.

The page names every package of sandboxd/ and nothing that is not there; the
backend registry and its names agree; import-linter's contracts (pyproject.toml)
are kept by the real tree and broken by a copy with forbidden imports added.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

from sandboxd.backends import BACKENDS, BackendName

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sandboxd"
PAGE = (ROOT / "ARCHITECTURE.md").read_text()
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _tree_block() -> str:
    match = re.search(r"## The tree, top to bottom\n\n```\n(.*?)```", PAGE, re.S)
    assert match is not None, "ARCHITECTURE.md has no tree block"
    return match.group(1)


def _tree_entries() -> set[str]:
    """Paths the tree names: its folders (``a/b/``) and its top-level modules."""
    entries: set[str] = set()
    parents: list[tuple[int, str]] = []
    for line in _tree_block().splitlines()[1:]:  # the first line is sandboxd/ itself
        indent = len(line) - len(line.lstrip())
        first = line.split()[0] if line.strip() else ""
        if first.endswith("/"):
            while parents and parents[-1][0] >= indent:
                parents.pop()
            path = "".join(p for _, p in parents) + first
            parents.append((indent, first))
            entries.add(path)
        elif indent == 2:  # the line of loose modules at the top
            entries |= {word for word in line.split() if word.endswith(".py")}
    return entries


def _top_level() -> set[str]:
    return {
        f"{p.name}/" if p.is_dir() else p.name
        for p in PACKAGE.iterdir()
        if (p.is_dir() and (p / "__init__.py").is_file()) or p.suffix == ".py"
    }


def test_the_tree_names_every_top_level_package_and_module() -> None:
    named = _tree_entries()
    assert sorted(_top_level() - named) == [], "sandboxd/ has these; ARCHITECTURE.md does not"


def test_every_folder_the_tree_names_is_a_package() -> None:
    named = _tree_entries()
    assert {"contract/", "backends/shared/", "backends/docker/", "transports/grpc/"} <= named
    files = [e for e in named if not e.endswith("/")]
    folders = [e for e in named if e.endswith("/")]
    missing = [e for e in files if not (PACKAGE / e).is_file()]
    missing += [e for e in folders if not (PACKAGE / e / "__init__.py").is_file()]
    assert sorted(missing) == []


def test_every_path_the_page_names_exists() -> None:
    # `service/tools.py`, `proto/sandboxd/v1/sandbox.proto`, `runtime_client/tool_stream.py`...
    paths = set(re.findall(r"`([\w.-]+/[\w./-]+\.(?:py|proto|toml))`", PAGE))
    assert len(paths) > 20
    missing = [p for p in sorted(paths) if not (PACKAGE / p).exists() and not (ROOT / p).exists()]
    assert missing == []


def test_the_backend_registry_and_its_names_agree() -> None:
    assert get_args(BackendName) == tuple(BACKENDS)
    for target in BACKENDS.values():
        module, _, attribute = target.partition(":")
        source = ROOT / (module.replace(".", "/") + ".py")
        assert f"class {attribute}" in source.read_text(), target


def _lint_imports(package_parent: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=package_parent,
        env={**os.environ, "PYTHONPATH": str(package_parent), "COLUMNS": "500"},
        capture_output=True,
        text=True,
    )


def test_the_import_contracts_are_kept() -> None:
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " BROKEN" not in run.stdout


# One forbidden import per contract (pyproject.toml's [tool.importlinter]).
FORBIDDEN = {
    "Layers: each package imports only the layers below it": (
        "backends/shared/channel.py",
        "from sandboxd.transports.grpc import status",
    ),
    "No import circles between the modules or packages of any one package": (
        "executor/wire.py",
        "from sandboxd.executor import main",
    ),
    "The contract imports nothing else of sandboxd, and of the rest only grpcio and protobuf": (
        "contract/models.py",
        "import pydantic",
    ),
    "The executor runs in a bare container: the standard library and the contract's "
    "stdlib-only modules": ("executor/records.py", "from sandboxd.contract import models"),
    "Transports do not import each other": (
        "transports/http/errors.py",
        "from sandboxd.transports.grpc import status",
    ),
    "Engines do not import each other; what they share is in backends.shared": (
        "backends/local/backend.py",
        "from sandboxd.backends.docker import disk",
    ),
    "backends.shared knows no engine": (
        "backends/shared/clone.py",
        "from sandboxd.backends.docker import disk",
    ),
    "Client applications (ctl, mcp) reach the daemon over gRPC, never its inside": (
        "ctl/render.py",
        "from sandboxd.service import scope",
    ),
}


def test_each_contract_breaks_when_its_forbidden_import_is_added(tmp_path: Path) -> None:
    copy = tmp_path / "sandboxd"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for module, statement in FORBIDDEN.values():
        with (copy / module).open("a") as source:
            source.write(f"\n{statement}  # forbidden\n")
    run = _lint_imports(tmp_path)
    assert run.returncode != 0
    verdicts = dict(_VERDICT.findall(run.stdout))
    assert set(verdicts) == set(FORBIDDEN)
    assert [name for name, verdict in verdicts.items() if verdict != "BROKEN"] == []


_VERDICT = re.compile(r"^(.+) (KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$", re.M)

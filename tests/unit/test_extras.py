"""sandboxd.contract.extras names, per extra, the modules pyproject.toml's extra installs;
the launchers (sandboxd.launch) and lazy imports name the missing extra."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from sandboxd.contract import extras
from tests.pyproject import PYPROJECT

OPTIONAL = PYPROJECT["project"]["optional-dependencies"]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache  # every installed file list, read once per run (seconds in .venv-frameworks)
def _top_level_providers() -> dict[str, set[str]]:
    """Top-level module -> the distributions that installed it, from their
    file lists (packages_distributions() before 3.11 reads only
    top_level.txt, which many wheels no longer carry)."""
    providers: dict[str, set[str]] = {}
    for dist in metadata.distributions():
        for file in dist.files or ():
            top = file.parts[0] if file.parts else ""
            top = top.removesuffix(".py")
            if top and top != ".." and not top.endswith((".dist-info", ".data", ".pth")):
                providers.setdefault(top, set()).add(dist.metadata["Name"])
    return providers


def _requirement_names(extra: str) -> set[str]:
    # Follows self-references such as "sandboxd[agent]".
    names: set[str] = set()
    for requirement in OPTIONAL[extra]:
        match = re.match(r"([A-Za-z0-9_.-]+)(?:\[([^\]]+)\])?", requirement)
        assert match is not None
        name, inner = match.groups()
        if _canonical(name) == "sandboxd":
            for sub in (inner or "").split(","):
                names |= _requirement_names(sub.strip())
        else:
            names.add(_canonical(name))
    return names


def test_every_extra_is_described() -> None:
    assert set(extras.EXTRAS) == set(OPTIONAL) - {"dev", "test"}


def test_base_dependencies_are_the_contract_only() -> None:
    base = {_canonical(re.split(r"[<>=!~ \[]", d)[0]) for d in PYPROJECT["project"]["dependencies"]}
    assert base == {"grpcio", "protobuf"}


@pytest.mark.parametrize("extra", sorted(set(extras.EXTRAS) - extras.FRAMEWORK_EXTRAS))
def test_extra_modules_match_its_requirements(extra: str) -> None:
    # (The frameworks' extras are installed, and checked, in the frameworks tier.)
    assert_extra_modules_match(extra)


def assert_extra_modules_match(extra: str) -> None:
    """Each module named for an extra comes from a distribution that extra installs,
    and each distribution it installs provides one of the named modules."""
    providers = _top_level_providers()
    required = _requirement_names(extra)
    provided: set[str] = set()
    for module in extras.EXTRAS[extra]:
        dists = {_canonical(d) for d in providers.get(module, set())}
        assert dists & required, f"{extra}: {module} comes from {dists}, not from {required}"
        provided |= dists & required
    assert provided == required


def test_dev_pulls_every_extra() -> None:
    dev = " ".join(OPTIONAL["dev"])
    match = re.search(r"sandboxd\[([^\]]+)\]", dev)
    assert match is not None
    pulled = {name.strip() for name in match.group(1).split(",")}
    assert pulled == {*extras.EXTRAS, "test"} - extras.FRAMEWORK_EXTRAS


def test_require_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(extras.EXTRAS, "ctl", ("typer", "sandboxd_no_such_module"))
    with pytest.raises(ImportError, match=r"pip install 'sandboxd\[ctl\]'.*sandboxd_no_such"):
        extras.require("ctl", "sandboxctl")
    extras.require("agent", "the agent runtime")  # installed in the dev venv


def test_launcher_prints_the_missing_extra_not_a_traceback() -> None:
    # A fresh interpreter where typer cannot be imported, as on the base install.
    script = (
        "import sys; sys.modules['typer'] = None\n"
        "import importlib.util\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n == 'typer' else real(n, *a)\n"
        "from sandboxd.launch import sandboxctl_main\n"
        "sys.argv = ['sandboxctl', 'list']\n"
        "sandboxctl_main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "sandboxctl needs the 'ctl' extra: pip install 'sandboxd[ctl]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_serve_names_the_python_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real thing runs on 3.10 itself (test_serve_on_3_10_says_it_needs_3_11);
    # here the check alone, on whatever Python runs the suite.
    monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
    needs = r"sandboxd serve needs Python 3\.11 or newer \(this is Python 3\.10\.13\)"
    with pytest.raises(ImportError, match=needs):
        extras.require("server", "sandboxd serve")
    extras.require("agent", "the agent runtime")  # the client's extras do not care


@pytest.mark.skipif(sys.version_info >= extras.SERVER_PYTHON, reason="only a 3.10 can show it")
def test_serve_on_3_10_says_it_needs_3_11(tmp_path: Path) -> None:
    for command in (
        [sys.executable, "-m", "sandboxd", "serve", "--socket", str(tmp_path / "s.sock")],
        [str(Path(sys.executable).parent / "sandboxd"), "serve"],
    ):
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "sandboxd serve needs Python 3.11 or newer" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "s.sock").exists()

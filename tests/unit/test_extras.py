"""sandboxd.extras names, per extra, the modules pyproject.toml's extra installs;
the launchers and lazy imports name the missing extra."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from sandboxd import extras

PYPROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
OPTIONAL = PYPROJECT["project"]["optional-dependencies"]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


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
    assert set(extras.EXTRAS) == set(OPTIONAL) - {"dev"}


def test_base_dependencies_are_the_contract_only() -> None:
    base = {_canonical(re.split(r"[<>=!~ \[]", d)[0]) for d in PYPROJECT["project"]["dependencies"]}
    assert base == {"grpcio", "protobuf"}


@pytest.mark.parametrize("extra", sorted(extras.EXTRAS))
def test_extra_modules_match_its_requirements(extra: str) -> None:
    # Each module named for an extra comes from a distribution that extra installs,
    # and each distribution it installs provides one of the named modules.
    providers = metadata.packages_distributions()
    required = _requirement_names(extra)
    provided: set[str] = set()
    for module in extras.EXTRAS[extra]:
        dists = {_canonical(d) for d in providers.get(module, [])}
        assert dists & required, f"{extra}: {module} comes from {dists}, not from {required}"
        provided |= dists & required
    assert provided == required


def test_dev_pulls_every_extra() -> None:
    dev = " ".join(OPTIONAL["dev"])
    match = re.search(r"sandboxd\[([^\]]+)\]", dev)
    assert match is not None
    assert {name.strip() for name in match.group(1).split(",")} == set(extras.EXTRAS)


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
        "from sandboxd.extras import sandboxctl_main\n"
        "sys.argv = ['sandboxctl', 'list']\n"
        "sandboxctl_main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "sandboxctl needs the 'ctl' extra: pip install 'sandboxd[ctl]'" in proc.stderr
    assert "Traceback" not in proc.stderr

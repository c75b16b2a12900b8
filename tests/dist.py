"""The packages `make dist` built (scripts/dist.sh), for the tests that check them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import sandboxd

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "dist"
VERSION = sandboxd.__version__
WHEEL = DIST / f"sandboxd-{VERSION}-py3-none-any.whl"
SDIST = DIST / f"sandboxd-{VERSION}.tar.gz"
NPM_TARBALL = DIST / f"sandboxd-client-{VERSION}.tgz"
UV = Path(sys.executable).parent / "uv"


def require_built(*packages: Path) -> None:
    """Fail (under CI=true) or skip unless `make dist` built ``packages``."""
    missing = [str(p.relative_to(ROOT)) for p in packages if not p.is_file()]
    if missing:
        problem = f"{', '.join(missing)} not built: run `make dist`"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {problem}")
        pytest.skip(problem)


def fresh_venv(folder: Path, *requirements: str, python: str = sys.executable) -> Path:
    """A new virtualenv of ``python`` in ``folder`` with ``requirements``; its python."""
    subprocess.run([str(UV), "venv", "--quiet", "--python", python, str(folder)], check=True)
    venv_python = folder / "bin" / "python"
    # --compile-bytecode: installed as pip installs (pip compiles; uv by default not).
    install = [str(UV), "pip", "install", "--quiet", "--compile-bytecode"]
    subprocess.run([*install, "--python", str(venv_python), *requirements], check=True)
    return venv_python

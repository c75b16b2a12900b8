"""One version, written once (sandboxd/__init__.py ``__version__``): the
Python package takes it from there, and the TypeScript package and the
CHANGELOG's top entry must say the same."""

from __future__ import annotations

import json
import re

import sandboxd
from tests.pyproject import PYPROJECT, ROOT


def test_pyproject_takes_the_version_from_the_package() -> None:
    assert "version" not in PYPROJECT["project"]
    assert "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "sandboxd.__version__"}


def test_the_typescript_package_has_the_same_version() -> None:
    package = json.loads((ROOT / "clients" / "typescript" / "package.json").read_text())
    assert package["version"] == sandboxd.__version__
    lock = json.loads((ROOT / "clients" / "typescript" / "package-lock.json").read_text())
    assert lock["version"] == lock["packages"][""]["version"] == sandboxd.__version__


def test_the_changelogs_top_entry_names_the_version() -> None:
    entries = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert entries, "CHANGELOG.md has no entry"
    assert re.match(rf"\[{re.escape(sandboxd.__version__)}\]", entries[0]), entries[0]

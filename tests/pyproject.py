"""The repository's pyproject.toml, parsed (tomllib is 3.11+; tomli on 3.10)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the client's tests run on 3.10 too
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())

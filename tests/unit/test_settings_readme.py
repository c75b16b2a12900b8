"""Every setting is in the README's settings table, with its default."""

from __future__ import annotations

import re
from pathlib import Path

from sandboxd.daemon.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `(SANDBOXD_[A-Z0-9_]+)` \| ([^|]+) \|", re.MULTILINE)


def _rows() -> dict[str, str]:
    return {name: default.strip() for name, default in ROW.findall(README.read_text())}


def test_every_setting_has_a_row_and_every_row_a_setting() -> None:
    prefix = Settings.model_config.get("env_prefix", "")
    fields = {f"{prefix}{name}".upper() for name in Settings.model_fields}
    rows = set(_rows())
    assert sorted(fields - rows) == [], "settings missing from README.md's table"
    assert sorted(rows - fields) == [], "README.md lists settings sandboxd does not have"


def test_plain_defaults_are_the_settings_defaults() -> None:
    rows = _rows()
    prefix = Settings.model_config.get("env_prefix", "")
    checked = 0
    for name, field in Settings.model_fields.items():
        default = field.default
        cell = rows[f"{prefix}{name}".upper()].strip("`").replace(",", "")
        if isinstance(default, bool):
            assert cell == ("true" if default else "false"), (name, cell)
        elif isinstance(default, int | float):
            assert float(cell) == default, (name, cell)
        else:
            continue  # paths, strings and computed defaults are described in words
        checked += 1
    assert checked >= 10

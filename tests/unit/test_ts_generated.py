"""clients/typescript/src/generated/*.ts are what scripts/ts_data.py makes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ts_data():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ts_data", ROOT / "scripts" / "ts_data.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_tool_specs_match_the_python_sources() -> None:
    ts_data = _ts_data()
    assert ts_data.TOOLS_TS.read_text(encoding="utf-8") == ts_data.tools_ts(), (
        "run `make ts-generate`"
    )


def test_generated_network_policy_matches_the_python_model() -> None:
    ts_data = _ts_data()
    assert ts_data.NETWORK_TS.read_text(encoding="utf-8") == ts_data.network_ts(), (
        "run `make ts-generate`"
    )


def test_generated_port_windows_match_the_contract() -> None:
    ts_data = _ts_data()
    assert ts_data.PORTS_TS.read_text(encoding="utf-8") == ts_data.ports_ts(), (
        "run `make ts-generate`"
    )


def test_every_alias_names_a_schema_property() -> None:
    for spec in _ts_data().tool_specs():
        for alias, canonical in spec["aliases"].items():
            assert canonical in spec["parameters"]["properties"], (spec["name"], alias)
            assert alias not in spec["parameters"]["properties"], (spec["name"], alias)

from __future__ import annotations

import pytest

from sandboxd.contract.tools import Param, ToolSpec
from sandboxd.executor.tools.args import parse
from sandboxd.executor.tools.result import ToolError

SPEC = ToolSpec(
    "demo",
    (
        Param("file_path", str, required=True),
        Param("n", int, default=5, minimum=0, maximum=10),
        Param("flag", bool, default=False),
    ),
    {"path": "file_path"},
)


def err(raw: dict[str, object]) -> str:
    with pytest.raises(ToolError) as info:
        parse(SPEC, raw)
    return info.value.result.text


def test_defaults_and_aliases() -> None:
    assert parse(SPEC, {"path": "a"}) == {"file_path": "a", "n": 5, "flag": False}


@pytest.mark.parametrize(
    ("raw", "value"),
    [("7", 7), (" 7 ", 7), (7.0, 7), ("+3", 3)],
)
def test_int_coercion(raw: object, value: int) -> None:
    assert parse(SPEC, {"file_path": "a", "n": raw})["n"] == value


@pytest.mark.parametrize(
    ("raw", "value"),
    [("true", True), ("False", False), (1, True), (0, False), ("yes", True)],
)
def test_bool_coercion(raw: object, value: bool) -> None:
    assert parse(SPEC, {"file_path": "a", "flag": raw})["flag"] is value


def test_null_means_absent() -> None:
    assert parse(SPEC, {"file_path": "a", "n": None})["n"] == 5


def test_errors() -> None:
    assert err({"file_path": "a", "n": 7.5}).startswith("Error: parameter n of demo must be an")
    too_big = "Error: parameter n of demo must be at most 10, got 11."
    assert err({"file_path": "a", "n": 11}) == too_big
    assert err({"file_path": "a", "flag": "2"}).startswith("Error: parameter flag of demo must be")
    assert err({"file_path": 3}).startswith("Error: parameter file_path of demo must be a string")
    assert err({"x": 1, "y": 2}) == (
        "Error: unknown parameters x, y for demo. Valid parameters: file_path, n, flag."
    )
    assert "given twice" in err({"file_path": "a", "path": "b"})


def test_same_value_under_alias_and_name_is_fine() -> None:
    assert parse(SPEC, {"file_path": "a", "path": "a"})["file_path"] == "a"

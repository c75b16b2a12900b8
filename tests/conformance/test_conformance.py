"""Run every conformance case on every backend (see ``cases``, ``backends``)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import pytest

from .backends import ToolBackend
from .cases import CASES, Case, Step

pytestmark = [pytest.mark.conformance, pytest.mark.anyio]

_FIELD = re.compile(r"\{call\.(\w+)\}")


def _fill(text: str, cwd: str, called: Mapping[str, object]) -> str:
    text = _FIELD.sub(lambda m: str(called[m.group(1)]), text)
    return text.replace("{cwd}", cwd)


def _args(step: Step, cwd: str, called: Mapping[str, object]) -> dict[str, object]:
    return {
        key: _fill(value, cwd, called) if isinstance(value, str) else value
        for key, value in step.args.items()
    }


def _check(step: Step, result: dict[str, object], cwd: str, called: Mapping[str, object]) -> None:
    text = result["text"]
    assert isinstance(text, str)
    where = f"{step.tool} {dict(step.args)!r}"
    assert len(text) <= 30_000, f"{where}: text longer than 30,000 characters"
    if step.text is not None:
        assert text == _fill(step.text, cwd, called), where
    if step.match is not None:
        pattern = _FIELD.sub(lambda m: re.escape(str(called[m.group(1)])), step.match)
        pattern = pattern.replace("{cwd}", re.escape(cwd))
        assert re.fullmatch(pattern, text, re.DOTALL), f"{where}: {text!r} !~ {pattern!r}"
    for part in step.contains:
        assert _fill(part, cwd, called) in text, f"{where}: {part!r} not in {text!r}"
    for part in step.absent:
        assert _fill(part, cwd, called) not in text, f"{where}: {part!r} in {text!r}"
    if step.is_error is not None:
        assert result["is_error"] is step.is_error, f"{where}: {text!r}"
    if result["is_error"]:
        assert text.startswith("Error: ") or "\nExit code: " in text, where
    fields = result["fields"]
    assert isinstance(fields, dict)
    for key, value in step.fields.items():
        assert key in fields, f"{where}: no field {key} in {fields!r}"
        assert fields[key] == value, f"{where}: field {key} = {fields[key]!r}, want {value!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_case(tool_backend: ToolBackend, case: Case) -> None:
    cwd = tool_backend.workdir
    for step in case.setup:
        result = await tool_backend.call(step.tool, _args(step, cwd, {}))
        if step.is_error is None:
            assert result["is_error"] is False, f"setup {step.tool} {step.args}: {result['text']}"
        _check(step, result, cwd, {})
    result = await tool_backend.call(case.call.tool, _args(case.call, cwd, {}))
    fields = result["fields"]
    assert isinstance(fields, dict)
    _check(case.call, result, cwd, fields)
    for step in case.then:
        follow = await tool_backend.call(step.tool, _args(step, cwd, fields))
        _check(step, follow, cwd, fields)


def test_case_names_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


def test_every_tool_is_covered() -> None:
    from sandboxd.contract.tools import TOOL_NAMES

    assert {c.call.tool for c in CASES} == set(TOOL_NAMES)

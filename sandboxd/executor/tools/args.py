"""Argument parsing shared by the six tools.

Models produce loosely typed JSON: aliases from other agents' conventions,
numbers as strings, stray keys. Each tool declares its parameters once as a
``ToolSpec`` (``sandboxd.contract.tools``); ``parse`` applies the aliases and
coercions TOOLS.md allows and turns everything else into a ``ToolError``
whose text names the valid keys, so the model can fix its call in one step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from sandboxd.contract.tools import Param, ToolSpec

from .result import ToolError

_INT_RE = re.compile(r"[+-]?\d+")
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})


def json_type(value: object) -> str:
    """The JSON name of a value's type, as a model would call it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _show(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _coerce(spec: ToolSpec, param: Param, value: object) -> object:
    name = param.name
    if param.kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ToolError(
            f"parameter {name} of {spec.tool} must be a boolean (true or false), "
            f"got {_show(value)} ({json_type(value)})."
        )
    if param.kind is int:
        number: int | None = None
        if isinstance(value, bool):
            number = None  # True is an int in Python, never a number to a model
        elif isinstance(value, int):
            number = value
        elif isinstance(value, float) and value.is_integer():
            number = int(value)
        elif isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
            number = int(value.strip())
        if number is None:
            raise ToolError(
                f"parameter {name} of {spec.tool} must be an integer, "
                f"got {_show(value)} ({json_type(value)})."
            )
        if param.bounds_checked_by_tool:
            return number
        if param.minimum is not None and number < param.minimum:
            raise ToolError(
                f"parameter {name} of {spec.tool} must be at least {param.minimum}, got {number}."
            )
        if param.maximum is not None and number > param.maximum:
            raise ToolError(
                f"parameter {name} of {spec.tool} must be at most {param.maximum}, got {number}."
            )
        return number
    if not isinstance(value, str):
        raise ToolError(
            f"parameter {name} of {spec.tool} must be a string, "
            f"got {_show(value)} ({json_type(value)})."
        )
    if "\x00" in value and name not in _MAY_HOLD_NUL:
        # Paths, patterns and commands become argv or syscall arguments, which
        # cannot carry NUL; file text can.
        noun = _NUL_NOUNS.get(name, "argument")
        raise ToolError(f"{name} contains a NUL byte, which no {noun} can contain. Remove it.")
    if param.choices and value not in param.choices:
        raise ToolError(
            f"parameter {name} of {spec.tool} must be one of "
            f"{', '.join(param.choices)}; got {_show(value)}."
        )
    return value


#: String parameters that are file text, where a NUL is just another character.
_MAY_HOLD_NUL = frozenset({"content", "old_string", "new_string"})
_NUL_NOUNS = {
    "file_path": "path",
    "path": "path",
    "workdir": "path",
    "command": "command",
    "pattern": "pattern",
    "glob": "glob pattern",
}


def parse(spec: ToolSpec, raw: Mapping[str, object]) -> dict[str, object]:
    """Validated arguments: every declared parameter present (default filled in)."""
    if not isinstance(raw, Mapping):
        raise ToolError(f"the arguments of {spec.tool} must be an object, got {json_type(raw)}.")
    by_name = {p.name: p for p in spec.params}
    given: dict[str, tuple[str, object]] = {}
    unknown: list[str] = []
    for key, value in raw.items():
        canonical = spec.aliases.get(key, key) if isinstance(key, str) else key
        if canonical not in by_name:
            unknown.append(str(key))
            continue
        if value is None:
            # Models send null for "not given"; treating it as absent is what
            # the model meant.
            continue
        if canonical in given:
            first = given[canonical][0]
            if given[canonical][1] != value:
                raise ToolError(
                    f"parameter {canonical} of {spec.tool} was given twice, as {first} and "
                    f"{key}, with different values. Give it once, as {canonical}."
                )
            continue
        given[canonical] = (str(key), value)
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise ToolError(
            f"unknown parameter{plural} {', '.join(unknown)} for {spec.tool}. "
            f"Valid parameters: {spec.names()}."
        )
    out: dict[str, object] = {}
    for param in spec.params:
        if param.name in given:
            out[param.name] = _coerce(spec, param, given[param.name][1])
        elif param.required:
            raise ToolError(
                f"missing required parameter {param.name} for {spec.tool}. "
                f"Valid parameters: {spec.names()}."
            )
        else:
            out[param.name] = param.default
    return out


def get_str(args: Mapping[str, object], name: str) -> str:
    value = args[name]
    assert isinstance(value, str)
    return value


def get_opt_str(args: Mapping[str, object], name: str) -> str | None:
    value = args[name]
    assert value is None or isinstance(value, str)
    return value


def get_int(args: Mapping[str, object], name: str) -> int:
    value = args[name]
    assert isinstance(value, int) and not isinstance(value, bool)
    return value


def get_bool(args: Mapping[str, object], name: str) -> bool:
    value = args[name]
    assert isinstance(value, bool)
    return value

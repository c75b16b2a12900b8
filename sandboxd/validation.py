"""Checks on request values, shared by every transport before any work starts."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sandboxd.errors import InvalidArgument, NotFound, ResourceExhausted

INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
MAX_LABEL_VALUE = 256
#: How deeply tool arguments (and any JSON a client sends) may nest. Far more
#: than any tool's arguments need; far below Python's recursion limit, which
#: every later encoder and copier of the value walks into.
MAX_JSON_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def text(value: str, field: str) -> str:
    """Refuse a string UTF-8 cannot encode (a lone surrogate from a JSON escape)."""
    found = _SURROGATE.search(value)
    if found is not None:
        raise InvalidArgument(
            f"{field} is not valid Unicode: it contains the lone surrogate "
            f"{found.group()!a} at index {found.start()}; send UTF-8 text"
        )
    return value


def json_tree(value: object, field: str, max_depth: int = MAX_JSON_DEPTH) -> object:
    """Check a decoded JSON value: nesting at most ``max_depth``, every string valid Unicode.

    Iterative, so no input can make the check itself overflow the stack.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            text(item, field)
        elif isinstance(item, (dict, list, tuple)):
            if depth > max_depth:
                raise InvalidArgument(f"{field} nests deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str):
                        text(key, field)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
    return value


def instance_id(value: str) -> str:
    if not isinstance(value, str) or not INSTANCE_ID.fullmatch(value):
        raise InvalidArgument(
            f"invalid instance id {value!r}: use 1-128 characters from [A-Za-z0-9_.-], "
            "starting with a letter or digit"
        )
    return value


def path(value: str, field: str = "path") -> str:
    if not value:
        raise InvalidArgument(f"{field} must not be empty")
    if "\x00" in value:
        raise InvalidArgument(f"{field} contains a NUL byte")
    text(value, field)
    if len(value.encode()) > 4096:
        raise InvalidArgument(f"{field} is longer than 4096 bytes")
    return value


def non_negative(value: int, field: str) -> int:
    if value < 0:
        raise InvalidArgument(f"{field} must not be negative (got {value})")
    return value


def labels(values: Mapping[str, str], field: str = "labels") -> Mapping[str, str]:
    for key, value in values.items():
        if not _LABEL_KEY.fullmatch(key):
            raise InvalidArgument(
                f"{field}: invalid key {key!r}: use 1-63 characters from [A-Za-z0-9_.-]"
            )
        text(value, f"{field}: value of {key!r}")
        if len(value) > MAX_LABEL_VALUE or "\x00" in value:
            raise InvalidArgument(
                f"{field}: value of {key!r} must be at most {MAX_LABEL_VALUE} characters, no NUL"
            )
    return values


def env(values: Mapping[str, str]) -> Mapping[str, str]:
    for key, value in values.items():
        if not _ENV_KEY.fullmatch(key):
            raise InvalidArgument(f"env: invalid variable name {key!r}")
        if "\x00" in value:
            raise InvalidArgument(f"env: value of {key} contains a NUL byte")
        text(value, f"env: value of {key}")
    return values


def unknown_instance(instance: str) -> NotFound:
    return NotFound(f"no sandbox with instance id {instance!r}; create it with CreateSandbox")


def json_object(raw: str, field: str, limit: int) -> dict[str, Any]:
    """A model's raw JSON arguments, as an object (every transport's one rule)."""
    if len(raw) > limit:
        raise ResourceExhausted(
            f"{field} is {len(raw)} bytes, over the payload limit of {limit} bytes"
        )
    try:
        value = json.loads(raw)
    except RecursionError:
        raise InvalidArgument(f"{field} nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidArgument(f"{field} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field} must be a JSON object")
    json_tree(value, field)
    return value

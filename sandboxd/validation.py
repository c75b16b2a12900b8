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
    return values


def unknown_instance(instance: str) -> NotFound:
    return NotFound(f"no sandbox with instance id {instance!r}; create it with CreateSandbox")


def json_object(text: str, field: str, limit: int) -> dict[str, Any]:
    """A model's raw JSON arguments, as an object (every transport's one rule)."""
    if len(text) > limit:
        raise ResourceExhausted(
            f"{field} is {len(text)} bytes, over the payload limit of {limit} bytes"
        )
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{field} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field} must be a JSON object")
    return value

"""The rules request values follow: instance ids, paths, labels, env, JSON arguments.

Checked once by the service before any work starts, and by the option rules
the engines apply (``backends/shared/options.py``); standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sandboxd.contract.errors import InvalidArgument, ResourceExhausted

INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
MAX_LABEL_VALUE = 256
#: How deeply tool arguments (and any JSON a client sends) may nest. Far more
#: than any tool's arguments need; far below Python's recursion limit, which
#: every later encoder and copier of the value walks into.
MAX_JSON_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
#: An image reference as the Docker engine parses one: [host[:port]/]path[:tag][@digest]
#: (distribution/reference's grammar). Anything else (``--privileged``, spaces)
#: is refused here, before it reaches an engine that would call it its own error.
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
MAX_IMAGE_REFERENCE = 512


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


def instance_id(value: str, what: str = "instance id") -> str:
    if not isinstance(value, str) or not INSTANCE_ID.fullmatch(value):
        raise InvalidArgument(
            f"invalid {what} {value!r}: use 1-128 characters from [A-Za-z0-9_.-], "
            "starting with a letter or digit"
        )
    return value


def snapshot_name(value: str) -> str:
    """A snapshot's name follows the instance id's rules (one pattern for both)."""
    return instance_id(value, "snapshot name")


def path(value: str, field: str = "path") -> str:
    if not value:
        raise InvalidArgument(f"{field} must not be empty")
    if "\x00" in value:
        raise InvalidArgument(f"{field} contains a NUL byte")
    text(value, field)
    if len(value.encode()) > 4096:
        raise InvalidArgument(f"{field} is longer than 4096 bytes")
    return value


def image_reference(value: str) -> str:
    if len(value) > MAX_IMAGE_REFERENCE or not _IMAGE.fullmatch(value):
        raise InvalidArgument(
            f"image {value[:80]!r} is not an image reference: use [registry/]name[:tag][@digest] "
            f"(lower-case name), at most {MAX_IMAGE_REFERENCE} characters"
        )
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


#: Linux's MAX_ARG_STRLEN: one argument or ``KEY=VALUE`` entry, with its NUL.
MAX_ARG_STRLEN = 32 * 4096
#: Arguments and environment of one command together (their bytes, NULs and
#: pointers, as the kernel counts them): half of the 2 MiB a default 8 MiB
#: stack gives execve, leaving room for the executor's own wrapper and base
#: environment. More was an E2BIG from the spawn, answered INTERNAL.
MAX_COMMAND_BYTES = 1 << 20


def _parts(argv: Sequence[str] | None, shell: str | None) -> list[str]:
    return [*(argv or ()), shell or ""]


def _execve_strings(parts: Sequence[str], values: Mapping[str, str]) -> list[bytes]:
    return [*(part.encode() for part in parts), *(f"{k}={v}".encode() for k, v in values.items())]


def command_bytes(argv: Sequence[str] | None, shell: str | None, values: Mapping[str, str]) -> int:
    """What a command's arguments and environment take of ``MAX_COMMAND_BYTES``:
    each string's bytes, its NUL and its pointer, as the kernel counts them."""
    return sum(len(string) + 1 + 8 for string in _execve_strings(_parts(argv, shell), values))


def command(
    argv: Sequence[str] | None, shell: str | None, cwd: str, values: Mapping[str, str]
) -> None:
    """One command to start (Exec, ExecStream, StartProcess): exactly one of
    ``argv`` and ``shell``, no NUL, valid text, and no more than the kernel's
    execve takes, said with the limit rather than failing in the spawn."""
    if (argv is None) == (shell is None):
        raise InvalidArgument("give exactly one of argv and shell")
    if argv is not None and (not argv or not argv[0]):
        raise InvalidArgument("argv must be non-empty and name a program")
    parts = _parts(argv, shell)
    for part in [*parts, cwd]:
        if "\x00" in part:
            raise InvalidArgument("command and cwd must not contain NUL bytes")
        text(part, "command and cwd")
    env(values)
    strings = _execve_strings(parts, values)
    for index, string in enumerate(strings):
        if len(string) >= MAX_ARG_STRLEN:
            what = "an environment entry" if index >= len(parts) else "one argument"
            raise InvalidArgument(
                f"{what} is {len(string)} bytes; the kernel takes at most "
                f"{MAX_ARG_STRLEN - 1} bytes per argument or KEY=VALUE (pass a long "
                "script through stdin or a file)"
            )
    total = command_bytes(argv, shell, values)
    if total > MAX_COMMAND_BYTES:
        raise InvalidArgument(
            f"the command and its environment take {total} bytes ({len(strings)} strings); "
            f"at most {MAX_COMMAND_BYTES} bytes are accepted"
        )


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

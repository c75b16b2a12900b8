"""The six tools' contract as clients see it: names, descriptions, JSON schemas.

Derived from the executor tools' ``SPEC``s (``sandboxd.executor.tools``,
standard library only), the one place a tool's parameters are written:
runtime_client's OpenAI/Anthropic schemas, the MCP tool list and the HTTP
routes all read them from here, and tests/unit/test_tool_contract.py checks
the typed gRPC tool messages against them.
"""

from __future__ import annotations

import copy
from typing import Any

from sandboxd.executor.tools.args import ToolSpec, json_schema
from sandboxd.executor.tools.bash import MAX_TIMEOUT_MS as BASH_MAX_TIMEOUT_MS
from sandboxd.executor.tools.bash import MIN_TIMEOUT_MS as BASH_MIN_TIMEOUT_MS
from sandboxd.executor.tools.session import SPECS, TOOL_NAMES
from sandboxd.models import ToolDescription

__all__ = [
    "BASH_MAX_TIMEOUT_MS",
    "BASH_MAX_TIMEOUT_S",
    "BASH_MIN_TIMEOUT_MS",
    "SPECS",
    "TOOL_NAMES",
    "ToolDescription",
    "ToolSpec",
    "description",
    "input_schema",
    "tool_descriptions",
]

#: bash's own limit, in seconds: what transports wait for before they give up on a call.
BASH_MAX_TIMEOUT_S = BASH_MAX_TIMEOUT_MS / 1000

_SCHEMAS = {name: json_schema(spec) for name, spec in SPECS.items()}


def input_schema(name: str) -> dict[str, Any]:
    """The tool's argument schema (a fresh copy: callers may adapt it)."""
    return copy.deepcopy(_SCHEMAS[name])


def description(name: str) -> str:
    return SPECS[name].description


def tool_descriptions() -> list[ToolDescription]:
    return [ToolDescription(name, description(name), input_schema(name)) for name in TOOL_NAMES]

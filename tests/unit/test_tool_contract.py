"""One tool contract: each tool's spec (sandboxd.contract.tools) is the source; every derived
form (JSON schemas, MCP list, HTTP routes, typed gRPC messages) must match it.

A parameter added to or removed from one side only fails here.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor

from runtime_client.sandbox_tools import DESCRIPTIONS, SANDBOX_TOOL_NAMES, SCHEMAS
from runtime_client.schema import to_anthropic_tools, to_openai_chat_tools
from sandboxd.contract import convert
from sandboxd.contract import tools as tool_contract
from sandboxd.contract.models import SandboxToolResult
from sandboxd.contract.tools import SPECS, TOOL_NAMES, json_schema
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.executor.tools import ToolSession

_KINDS = {
    FieldDescriptor.TYPE_STRING: str,
    FieldDescriptor.TYPE_INT64: int,
    FieldDescriptor.TYPE_BOOL: bool,
}
_NOT_PARAMS = {"instance_id", "tool_call_id"}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _typed(name: str, kind: str) -> Any:
    """The typed message of a tool, or None for a CallTool-only tool."""
    return getattr(pb, f"{_camel(name)}{kind}", None)


def documented_fields(name: str) -> list[str]:
    """The result fields a tool's module docstring lists under ``Fields:``."""
    doc = importlib.import_module(f"sandboxd.executor.tools.{name}").__doc__ or ""
    block = doc.split("\nFields:\n", 1)[1]
    names: list[str] = []
    for line in block.splitlines():
        if not line.strip():
            break
        if line.startswith("  ") and not line.startswith("   "):
            head = line.strip().split("  ", 1)[0]
            names += [part.strip() for part in head.split(",")]
    return names


def test_tool_names_come_from_the_specs() -> None:
    assert TOOL_NAMES == tuple(SPECS) == tool_contract.TOOL_NAMES == SANDBOX_TOOL_NAMES
    assert TOOL_NAMES[:6] == ("read", "write", "edit", "bash", "grep", "glob")


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_tool_and_parameter_is_described(name: str) -> None:
    spec = SPECS[name]
    assert spec.description, name
    assert [p.name for p in spec.params if not p.description] == []
    for alias, target in spec.aliases.items():
        assert target in {p.name for p in spec.params}, f"{name}: alias {alias} -> {target}"


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_exported_schemas_are_the_specs(name: str) -> None:
    schema = json_schema(SPECS[name])
    assert SCHEMAS[name] == schema == tool_contract.input_schema(name)
    assert DESCRIPTIONS[name] == SPECS[name].description
    assert list(schema["properties"]) == [p.name for p in SPECS[name].params]  # type: ignore[call-overload]


def test_bounds_reach_the_schemas() -> None:
    # grep -A had a maximum in the tool and none in the hand-written schema.
    assert SCHEMAS["grep"]["properties"]["-A"]["maximum"] == 100
    bash_timeout = SCHEMAS["bash"]["properties"]["timeout"]
    assert bash_timeout["maximum"] == tool_contract.BASH_MAX_TIMEOUT_MS == 600_000
    assert bash_timeout["minimum"] == tool_contract.BASH_MIN_TIMEOUT_MS


def test_mcp_and_model_exports_carry_the_same_schemas() -> None:
    from runtime_client.sandbox_tools import sandbox_tools
    from sandboxd.mcp.bridge import tool_list

    listed = {tool.name: (tool.description, tool.input_schema) for tool in tool_list()}
    assert listed == {name: (DESCRIPTIONS[name], SCHEMAS[name]) for name in TOOL_NAMES}
    tools = sandbox_tools(object())  # type: ignore[arg-type]
    anthropic = {t["name"]: t["input_schema"] for t in to_anthropic_tools(tools)}
    openai = {
        t["function"]["name"]: t["function"]["parameters"] for t in to_openai_chat_tools(tools)
    }
    assert anthropic == openai == {name: SCHEMAS[name] for name in TOOL_NAMES}


def test_mcp_annotations_are_the_specs() -> None:
    from sandboxd.mcp.bridge import tool_list

    hints = {tool.name: tool.annotations for tool in tool_list()}
    for name in TOOL_NAMES:
        hint = hints[name]
        assert hint is not None
        assert hint.read_only_hint is SPECS[name].read_only, name
        assert hint.destructive_hint is (None if SPECS[name].read_only else True), name
    # Decided here, once: which tools only look (a new tool, or a flag flipped, fails).
    assert {name for name in TOOL_NAMES if SPECS[name].read_only} == {
        "read",
        "grep",
        "glob",
        "bash_output",
    }


# Tools with a typed RPC; the others (bash_output, kill_shell) are served by CallTool only.
TYPED_TOOLS = [name for name in TOOL_NAMES if _typed(name, "Request") is not None]


def test_the_first_six_tools_have_typed_rpcs() -> None:
    assert TYPED_TOOLS == ["read", "write", "edit", "bash", "grep", "glob"]


@pytest.mark.parametrize("name", TYPED_TOOLS)
def test_typed_request_fields_match_the_spec(name: str) -> None:
    request = _typed(name, "Request")
    assert request is not None
    proto = {
        convert.tool_param_name(field.name): _KINDS[field.type]
        for field in request.DESCRIPTOR.fields
        if field.name not in _NOT_PARAMS
    }
    spec = {param.name: param.kind for param in SPECS[name].params}
    assert proto == spec


@pytest.mark.parametrize("name", TYPED_TOOLS)
def test_typed_response_has_every_documented_field(name: str) -> None:
    response = _typed(name, "Response")
    assert response is not None
    fields = set(response.DESCRIPTOR.fields_by_name)
    assert {"text", "is_error"} <= fields
    documented = documented_fields(name)
    assert documented, f"{name}'s docstring lists no Fields"
    assert [f for f in documented if f not in fields] == []
    assert sorted(fields - {"text", "is_error"}) == sorted(documented)


# Real calls, so the fields checked are those the tools really return.
_CALLS: list[tuple[str, dict[str, object]]] = [
    ("write", {"file_path": "a.txt", "content": "one\ntwo\n" + "x" * 2500 + "\n"}),
    ("read", {"file_path": "a.txt"}),
    ("read", {"file_path": "a.txt", "limit": 1}),
    ("edit", {"file_path": "a.txt", "old_string": "one", "new_string": "uno"}),
    ("write", {"file_path": "a.txt", "content": "again\n"}),
    ("bash", {"command": "echo hi"}),
    ("bash", {"command": "sleep 0.1", "run_in_background": True}),
    ("grep", {"pattern": "again"}),
    ("grep", {"pattern": "a", "output_mode": "content", "-A": 1}),
    ("grep", {"pattern": "a", "output_mode": "count"}),
    ("glob", {"pattern": "*.txt", "head_limit": 1}),
    ("read", {"file_path": "missing.txt"}),
]


@pytest.fixture(scope="module")
def real_results(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, SandboxToolResult]]:
    root = tmp_path_factory.mktemp("contract")
    session = ToolSession(str(root / "ws"), state_dir=str(root / "state"))
    out = []
    try:
        for name, args in _CALLS:
            raw = session.run(name, args, cancel=threading.Event())
            fields = raw["fields"]
            assert isinstance(fields, dict)
            out.append((name, SandboxToolResult(str(raw["text"]), bool(raw["is_error"]), fields)))
    finally:
        session.close()
    return out


def test_typed_responses_drop_no_field_a_tool_returns(
    real_results: list[tuple[str, SandboxToolResult]], caplog: pytest.LogCaptureFixture
) -> None:
    seen: dict[str, set[str]] = {}
    for name, result in real_results:
        response = _typed(name, "Response")
        message = convert.tool_response_to_pb(response, result)
        for key, value in result.fields.items():
            assert key in response.DESCRIPTOR.fields_by_name, f"{name} returns {key}"
            field = response.DESCRIPTOR.fields_by_name[key]
            if value is None and field.has_presence:
                assert not message.HasField(key)
            elif value is None:
                # No presence in proto3 (log_path): None is the empty value.
                assert getattr(message, key) == field.default_value
            elif isinstance(value, list):
                assert list(getattr(message, key)) == value
            else:
                assert getattr(message, key) == value, (name, key)
            seen.setdefault(name, set()).add(key)
    assert set(seen) == {"read", "write", "edit", "bash", "grep", "glob"}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_malformed_field_is_dropped_loudly(caplog: pytest.LogCaptureFixture) -> None:
    bad = SandboxToolResult("ok", False, {"exit_code": "not a number", "timed_out": True})
    with caplog.at_level(logging.WARNING, logger="sandboxd.contract.convert"):
        message = convert.tool_response_to_pb(pb.BashResponse, bad)
    assert message.timed_out is True
    assert not message.HasField("exit_code")
    assert "dropped field exit_code" in caplog.text


def test_docstring_parser_reads_continuations_and_pairs() -> None:
    assert documented_fields("edit") == [
        "path",
        "replacements",
        "first_line",
        "last_line",
        "lines",
        "match_level",
        "created",
    ]

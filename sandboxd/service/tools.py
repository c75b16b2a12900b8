"""The agent tools: their descriptions, and one call with the arguments a model produced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandboxd.contract import validation
from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import (
    SandboxToolResult,
    ToolDescription,
)
from sandboxd.contract.tools import TOOL_NAMES, description, input_schema
from sandboxd.service.core import ServiceCore


class Tools(ServiceCore):
    def list_tools(self) -> list[ToolDescription]:
        """The tools' contract, derived from the tools' own specs."""
        return [ToolDescription(name, description(name), input_schema(name)) for name in TOOL_NAMES]

    async def call_tool(
        self,
        instance_id: str,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        tool_call_id: str | None = None,
        arguments_field: str = "arguments",
        cwd: str | None = None,
    ) -> SandboxToolResult:
        """Run one of the six tools with the arguments a model produced.

        ``arguments`` is an object or its JSON text, parsed here (bounded,
        one rule for every transport; ``arguments_field`` names it in errors).
        Aliases, coercion and unknown keys are the tool's business: a bad
        argument comes back as an ``is_error`` result the model can act on.
        With a ``tool_call_id``, a write, edit or bash that already completed
        returns its recorded result instead of running again. ``cwd`` is the
        folder the call runs in (relative paths and bash start there).
        """
        if isinstance(arguments, str):
            arguments = validation.json_object(
                arguments, arguments_field, self.settings.max_payload_bytes
            )
        if tool_call_id is not None and (
            not tool_call_id or len(tool_call_id) > 256 or "\x00" in tool_call_id
        ):
            raise InvalidArgument("tool_call_id must be 1-256 characters without NUL")
        if name not in TOOL_NAMES:
            raise InvalidArgument(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
        if not isinstance(arguments, Mapping):
            raise InvalidArgument("tool arguments must be an object")
        validation.json_tree(dict(arguments), "tool arguments")
        if tool_call_id is not None:
            validation.text(tool_call_id, "tool_call_id")
        if cwd is not None and (not cwd or len(cwd) > 4096 or "\x00" in cwd):
            raise InvalidArgument("cwd must be 1-4096 characters without NUL")
        if cwd is not None:
            validation.text(cwd, "cwd")
        workspace = await self._workspace(instance_id)
        request: dict[str, Any] = {"name": name, "args": dict(arguments)}
        if tool_call_id:
            request["tool_call_id"] = tool_call_id
        if cwd:
            request["cwd"] = cwd
        with self.gateways.precedence.call(instance_id):
            raw = await workspace.call("tool", request)
        fields = raw.get("fields")
        return SandboxToolResult(
            text=str(raw.get("text", "")),
            is_error=bool(raw.get("is_error")),
            fields=fields if isinstance(fields, dict) else {},
        )

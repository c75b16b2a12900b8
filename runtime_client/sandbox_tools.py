"""The sandbox tools bound to one ``Sandbox``.

The six of TOOLS.md (read, write, edit, bash, grep, glob), and bash's
background-job tools (bash_output, kill_shell).

They hand the model's arguments to ``Sandbox.call_tool`` untouched: aliases,
numeric strings and unknown keys are judged by the one implementation of the
tools inside sandboxd, so the schemas here describe, they do not validate.
"""

from __future__ import annotations

import itertools
import posixpath
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import anyio

from runtime_client.errors import SandboxUnavailable
from runtime_client.sandbox import Sandbox
from runtime_client.tools import Tool, ToolContext, ToolResult
from sandboxd.contract.tools import BASH_MAX_TIMEOUT_S, TOOL_NAMES, description, input_schema

SANDBOX_TOOL_NAMES: tuple[str, ...] = TOOL_NAMES

# bash enforces its own limit; the runner's is only a backstop for a sandbox
# that stops answering.
_BASH_BACKSTOP_S = BASH_MAX_TIMEOUT_S + 60.0
_FILE_TOOL_BACKSTOP_S = 300.0
_RETRY_DELAY_S = 0.5


@runtime_checkable
class SandboxToolsProvider(Protocol):
    """A ``SandboxFactory`` with this method chooses its sandbox's tools itself."""

    def tools(self, sandbox: Sandbox) -> Sequence[Tool[Any]]: ...


# Derived from the tools' own specs (sandboxd.contract.tools): one source for
# the schemas here, the MCP bridge's tool list and the HTTP routes.
SCHEMAS: Mapping[str, dict[str, Any]] = {name: input_schema(name) for name in TOOL_NAMES}
DESCRIPTIONS: Mapping[str, str] = {name: description(name) for name in TOOL_NAMES}


def _path_keys(arguments: Mapping[str, Any]) -> frozenset[str]:
    # Paths cannot be resolved here (the cwd lives in the sandbox), so calls
    # are ordered per file name: a superset of "same path", never less.
    raw = arguments.get("file_path", arguments.get("path"))
    if not isinstance(raw, str) or not raw:
        return frozenset({"file:?"})
    return frozenset({f"file:{posixpath.basename(posixpath.normpath(raw))}"})


def _bash_keys(arguments: Mapping[str, Any]) -> frozenset[str]:
    return frozenset({"bash"})


def _no_keys(arguments: Mapping[str, Any]) -> frozenset[str]:
    return frozenset()


_LOCK_KEYS = {
    "read": _no_keys,
    "grep": _no_keys,
    "glob": _no_keys,
    "write": _path_keys,
    "edit": _path_keys,
    "bash": _bash_keys,
    # Kept in the model's order with bash calls: a job is started, then read or stopped.
    "bash_output": _bash_keys,
    "kill_shell": _bash_keys,
}


def _pass_through(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    return arguments


def _sandbox_call_id(scope: str, sequence: int, tool_call_id: str) -> str:
    # The sandbox remembers call ids per instance, for good; a model's ids are
    # not unique enough for that (a scripted model says "call_1" every run,
    # some servers repeat ids every turn). The id only has to stay the same
    # across the retry below, so it is made here; the model's id is kept in
    # it for the logs.
    return f"{scope}:{sequence}:{tool_call_id.replace(chr(0), '')}"[:256]


def sandbox_tool(
    sandbox: Sandbox,
    name: str,
    *,
    scope: str | None = None,
    sequence: Iterator[int] | None = None,
) -> Tool[Mapping[str, Any]]:
    """One of the sandbox tools, bound to ``sandbox``.

    A call that meets ``SandboxUnavailable`` (say, the daemon restarting) is
    sent once more with the same ``tool_call_id``, which sandboxd uses to
    answer a write, edit or bash that already happened with its recorded
    result instead of doing it twice. Each call gets an id of its own
    (``scope`` and ``sequence`` are shared by tools made together).
    """
    if name not in SCHEMAS:
        raise ValueError(f"no sandbox tool {name!r}; they are {', '.join(SANDBOX_TOOL_NAMES)}")
    scope = scope or secrets.token_hex(8)
    numbers = sequence or itertools.count(1)

    async def run(context: ToolContext[Mapping[str, Any]]) -> ToolResult:
        call_id = _sandbox_call_id(scope, next(numbers), context.tool_call_id)
        arguments = dict(context.arguments)
        try:
            result = await sandbox.call_tool(name, arguments, tool_call_id=call_id)
        except SandboxUnavailable:
            context.log(f"sandbox unavailable; retrying {name} once")
            await anyio.sleep(_RETRY_DELAY_S)
            result = await sandbox.call_tool(name, arguments, tool_call_id=call_id)
        return ToolResult(output=result.text, is_error=result.is_error, fields=result.fields)

    return Tool(
        name=name,
        description=DESCRIPTIONS[name],
        parameters=SCHEMAS[name],
        run=run,
        parse=_pass_through,
        timeout=_BASH_BACKSTOP_S if name == "bash" else _FILE_TOOL_BACKSTOP_S,
        # A tool without its own rule (a new one) runs one at a time, like bash.
        lock_keys=_LOCK_KEYS.get(name, _bash_keys),
    )


def sandbox_tools(sandbox: Sandbox) -> list[Tool[Mapping[str, Any]]]:
    """The sandbox tools bound to ``sandbox``, in the order of TOOLS.md."""
    scope, sequence = secrets.token_hex(8), itertools.count(1)
    return [
        sandbox_tool(sandbox, name, scope=scope, sequence=sequence) for name in SANDBOX_TOOL_NAMES
    ]


def tools_for(factory: object, sandbox: Sandbox) -> list[Tool[Any]]:
    """The factory's own tool set when it offers one, else the sandbox tools."""
    if isinstance(factory, SandboxToolsProvider):
        return list(factory.tools(sandbox))
    return list(sandbox_tools(sandbox))

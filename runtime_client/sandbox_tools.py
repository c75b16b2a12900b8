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

SANDBOX_TOOL_NAMES: tuple[str, ...] = (
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "glob",
    "bash_output",
    "kill_shell",
)

# bash enforces its own limit (at most 600 s); the runner's is only a backstop
# for a sandbox that stops answering.
_BASH_BACKSTOP_S = 660.0
_FILE_TOOL_BACKSTOP_S = 300.0
_RETRY_DELAY_S = 0.5


@runtime_checkable
class SandboxToolsProvider(Protocol):
    """A ``SandboxFactory`` with this method chooses its sandbox's tools itself."""

    def tools(self, sandbox: Sandbox) -> Sequence[Tool[Any]]: ...


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _integer(description: str, minimum: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    return schema


def _boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def _object(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


SCHEMAS: Mapping[str, dict[str, Any]] = {
    "read": _object(
        {
            "file_path": _string("Path of the file: absolute, or relative to the working folder."),
            "offset": _integer("1-based line to start at (default 1).", 0),
            "limit": _integer("Number of lines to read (default 2000).", 1),
        },
        ["file_path"],
    ),
    "write": _object(
        {
            "file_path": _string("Path of the file: absolute, or relative to the working folder."),
            "content": _string("The whole new content of the file."),
        },
        ["file_path", "content"],
    ),
    "edit": _object(
        {
            "file_path": _string("Path of the file: absolute, or relative to the working folder."),
            "old_string": _string(
                "Exact text to replace, without read's line-number prefixes. Empty creates "
                "a missing file."
            ),
            "new_string": _string("Text to put in its place (inserted literally)."),
            "replace_all": _boolean("Replace every occurrence (default false)."),
        },
        ["file_path", "old_string", "new_string"],
    ),
    "bash": _object(
        {
            "command": _string("The command, run by bash -c in the working folder."),
            "timeout": _integer("Timeout in milliseconds (1000-600000, default 120000).", 1000),
            "description": _string("What the command does, in a few words (for logs)."),
            "run_in_background": _boolean(
                "Start it in the background and return at once with a job id (e.g. bash_1) "
                "to follow with bash_output and stop with kill_shell."
            ),
            "workdir": _string("Run in this folder without changing the saved working folder."),
        },
        ["command"],
    ),
    "grep": _object(
        {
            "pattern": _string("Regular expression (Rust/ripgrep syntax)."),
            "path": _string("File or folder to search (default: the working folder)."),
            "glob": _string("Only files whose names match this glob, e.g. *.py."),
            "type": _string("Only files of this ripgrep type, e.g. py."),
            "output_mode": {
                "type": "string",
                "enum": ["files_with_matches", "content", "count"],
                "description": "files_with_matches (default), content, or count.",
            },
            "-i": _boolean("Case-insensitive."),
            "-n": _boolean("Line numbers in content mode (default true)."),
            "-A": _integer("Lines of context after each match (content mode).", 0),
            "-B": _integer("Lines of context before each match (content mode).", 0),
            "-C": _integer("Lines of context around each match (content mode).", 0),
            "multiline": _boolean("Let the pattern span lines."),
            "literal": _boolean("Treat the pattern as plain text, not a regex."),
            "head_limit": _integer("Show at most this many entries (default 250).", 1),
            "offset": _integer("Skip this many entries (paging).", 0),
        },
        ["pattern"],
    ),
    "glob": _object(
        {
            "pattern": _string(
                "Glob: *, **, ?, [...], {a,b}. Without / it matches names at any depth."
            ),
            "path": _string("Folder to search (default: the working folder)."),
            "head_limit": _integer("Show at most this many files (default 100).", 1),
            "offset": _integer("Skip this many files (paging).", 0),
            "no_ignore": _boolean("Include files that .gitignore hides."),
        },
        ["pattern"],
    ),
    "bash_output": _object(
        {
            "bash_id": _string("The background job's id, as bash returned it (e.g. bash_1)."),
            "filter": _string(
                "Regular expression: show only matching lines (the others still count as read)."
            ),
        },
        ["bash_id"],
    ),
    "kill_shell": _object(
        {"shell_id": _string("The background job's id, as bash returned it (e.g. bash_1).")},
        ["shell_id"],
    ),
}

DESCRIPTIONS: Mapping[str, str] = {
    "read": (
        "Read a text file, shown cat -n style with line numbers. Pages of 2000 lines; "
        "use offset and limit for the rest."
    ),
    "write": (
        "Create or overwrite a file with the given content; parent folders are created. "
        "Overwriting needs a read of the file first."
    ),
    "edit": (
        "Replace old_string with new_string in a file. old_string must match exactly one "
        "place unless replace_all is true. Read the file first."
    ),
    "bash": (
        "Run a shell command in the sandbox and get its output and exit code. The working "
        "folder and exported variables persist between calls."
    ),
    "grep": (
        "Search file contents with a regular expression (ripgrep). Lists matching files by "
        "default; output_mode=content shows the lines."
    ),
    "glob": "Find files by name pattern, newest first (e.g. **/*.py).",
    "bash_output": (
        "Get the new output of a background bash job since the last bash_output call, and "
        "whether it is still running or how it ended."
    ),
    "kill_shell": "Stop a background bash job and every process it started.",
}


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
        lock_keys=_LOCK_KEYS[name],
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

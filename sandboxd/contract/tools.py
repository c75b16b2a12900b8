"""The tools' contract: every tool's parameters, written once, and what derives from them.

One ``ToolSpec`` per tool (names, aliases, types, bounds, defaults,
descriptions) is the single source of its JSON schema everywhere: the
executor parses a model's arguments against it (``executor/tools/args.py``),
runtime_client's OpenAI/Anthropic schemas, the MCP tool list, the HTTP routes
and ``ListTools`` read it from here, and tests/unit/test_tool_contract.py
checks the typed gRPC tool messages against it. Standard library only: the
executor ships this module into every container.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Param:
    name: str
    kind: type  # str, int or bool
    required: bool = False
    default: object = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    #: What a model reads about this parameter (the exported JSON schemas).
    description: str = ""
    #: The tool checks the bounds itself, with a more helpful message than parse's.
    bounds_checked_by_tool: bool = False


@dataclass(frozen=True)
class ToolSpec:
    """One tool's contract: the single source of its JSON schema everywhere.

    runtime_client's OpenAI/Anthropic schemas, the MCP tool list, the HTTP
    routes' documented bodies and the typed gRPC requests (by a drift test)
    all derive from it (``json_schema``).
    """

    tool: str
    params: tuple[Param, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    #: The tool only looks: it changes nothing in the workspace. The others may
    #: write, delete or run anything. MCP hosts read this (the bridge's
    #: readOnlyHint / destructiveHint) to decide which calls need approval.
    read_only: bool = False

    def names(self) -> str:
        return ", ".join(p.name for p in self.params)


PATH_DESCRIPTION = "Path of the file: absolute, or relative to the working folder."

_JSON_TYPES = {str: "string", int: "integer", bool: "boolean"}


def json_schema(spec: ToolSpec) -> dict[str, object]:
    """The JSON schema of the tool's arguments: canonical names (aliases are not shown)."""
    properties: dict[str, object] = {}
    for param in spec.params:
        schema: dict[str, object] = {"type": _JSON_TYPES[param.kind]}
        if param.choices:
            schema["enum"] = list(param.choices)
        if param.minimum is not None:
            schema["minimum"] = param.minimum
        if param.maximum is not None:
            schema["maximum"] = param.maximum
        if param.default is not None:
            schema["default"] = param.default
        schema["description"] = param.description
        properties[param.name] = schema
    return {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in spec.params if p.required],
        "additionalProperties": False,
    }


#: bash's timeout bounds, in milliseconds.
BASH_MIN_TIMEOUT_MS = 1_000
BASH_MAX_TIMEOUT_MS = 600_000
#: grep's output modes.
GREP_MODES = ("files_with_matches", "content", "count")
_JOB_ID = "The background job's id, as bash returned it (e.g. bash_1)."

READ = ToolSpec(
    "read",
    (
        Param("file_path", str, required=True, description=PATH_DESCRIPTION),
        Param("offset", int, default=1, minimum=0, description="1-based line to start at."),
        Param("limit", int, default=2000, minimum=1, description="Number of lines to read."),
    ),
    {"path": "file_path"},
    description=(
        "Read a text file, shown cat -n style with line numbers. Pages of 2000 lines; "
        "use offset and limit for the rest."
    ),
    read_only=True,
)

WRITE = ToolSpec(
    "write",
    (
        Param("file_path", str, required=True, description=PATH_DESCRIPTION),
        Param("content", str, required=True, description="The whole new content of the file."),
    ),
    {"path": "file_path", "file_text": "content"},
    description=(
        "Create or overwrite a file with the given content; parent folders are created. "
        "Overwriting needs a read of the file first."
    ),
)

EDIT = ToolSpec(
    "edit",
    (
        Param("file_path", str, required=True, description=PATH_DESCRIPTION),
        Param(
            "old_string",
            str,
            required=True,
            description="Exact text to replace, without read's line-number prefixes. "
            "Empty creates a missing file.",
        ),
        Param(
            "new_string",
            str,
            required=True,
            description="Text to put in its place (inserted literally).",
        ),
        Param("replace_all", bool, default=False, description="Replace every occurrence."),
    ),
    {
        "path": "file_path",
        "oldText": "old_string",
        "old_str": "old_string",
        "newText": "new_string",
        "new_str": "new_string",
        "replaceAll": "replace_all",
    },
    description=(
        "Replace old_string with new_string in a file. old_string must match exactly one "
        "place unless replace_all is true. Read the file first."
    ),
)

BASH = ToolSpec(
    "bash",
    (
        Param(
            "command",
            str,
            required=True,
            description="The command, run by bash -c in the working folder.",
        ),
        Param(
            "timeout",
            int,
            default=120_000,
            minimum=BASH_MIN_TIMEOUT_MS,
            maximum=BASH_MAX_TIMEOUT_MS,
            bounds_checked_by_tool=True,
            description="Timeout in milliseconds.",
        ),
        Param("description", str, description="What the command does, in a few words (for logs)."),
        Param(
            "run_in_background",
            bool,
            default=False,
            description="Start it in the background and return at once with a job id "
            "(e.g. bash_1) to follow with bash_output and stop with kill_shell.",
        ),
        Param(
            "workdir",
            str,
            description="Run in this folder without changing the saved working folder.",
        ),
    ),
    description=(
        "Run a shell command in the sandbox and get its output and exit code. The working "
        "folder and exported variables persist between calls."
    ),
)

GREP = ToolSpec(
    "grep",
    (
        Param(
            "pattern", str, required=True, description="Regular expression (Rust/ripgrep syntax)."
        ),
        Param("path", str, description="File or folder to search (default: the working folder)."),
        Param("glob", str, description="Only files whose names match this glob, e.g. *.py."),
        Param("type", str, description="Only files of this ripgrep type, e.g. py."),
        Param(
            "output_mode",
            str,
            default="files_with_matches",
            choices=GREP_MODES,
            description="files_with_matches, content, or count.",
        ),
        Param("-i", bool, default=False, description="Case-insensitive."),
        Param("-n", bool, default=True, description="Line numbers in content mode."),
        Param(
            "-A",
            int,
            default=0,
            minimum=0,
            maximum=100,
            description="Lines of context after each match (content mode).",
        ),
        Param(
            "-B",
            int,
            default=0,
            minimum=0,
            maximum=100,
            description="Lines of context before each match (content mode).",
        ),
        Param(
            "-C",
            int,
            default=0,
            minimum=0,
            maximum=100,
            description="Lines of context around each match (content mode).",
        ),
        Param("multiline", bool, default=False, description="Let the pattern span lines."),
        Param(
            "literal",
            bool,
            default=False,
            description="Treat the pattern as plain text, not a regex.",
        ),
        Param(
            "head_limit",
            int,
            default=250,
            minimum=1,
            description="Show at most this many entries.",
        ),
        Param("offset", int, default=0, minimum=0, description="Skip this many entries (paging)."),
    ),
    {"include": "glob"},
    description=(
        "Search file contents with a regular expression (ripgrep). Lists matching files by "
        "default; output_mode=content shows the lines."
    ),
    read_only=True,
)

GLOB = ToolSpec(
    "glob",
    (
        Param(
            "pattern",
            str,
            required=True,
            description="Glob: *, **, ?, [...], {a,b}. Without / it matches names at any depth.",
        ),
        Param("path", str, description="Folder to search (default: the working folder)."),
        Param(
            "head_limit", int, default=100, minimum=1, description="Show at most this many files."
        ),
        Param("offset", int, default=0, minimum=0, description="Skip this many files (paging)."),
        Param("no_ignore", bool, default=False, description="Include files that .gitignore hides."),
    ),
    description="Find files by name pattern, newest first (e.g. **/*.py).",
    read_only=True,
)

BASH_OUTPUT = ToolSpec(
    "bash_output",
    (
        Param("bash_id", str, required=True, description=_JOB_ID),
        Param(
            "filter",
            str,
            description="Regular expression: show only matching lines "
            "(the others still count as read).",
        ),
    ),
    {"shell_id": "bash_id"},
    description=(
        "Get the new output of a background bash job since the last bash_output call, and "
        "whether it is still running or how it ended."
    ),
    read_only=True,  # it moves the job's read offset, and nothing in the workspace
)

KILL_SHELL = ToolSpec(
    "kill_shell",
    (Param("shell_id", str, required=True, description=_JOB_ID),),
    {"bash_id": "shell_id"},
    description="Stop a background bash job and every process it started.",
)


#: Every tool's contract, in TOOLS.md order: the one list of tools. A new tool
#: adds its spec here and its handler in ``executor/tools/session.py``.
SPECS: dict[str, ToolSpec] = {
    spec.tool: spec
    for spec in (
        READ,
        WRITE,
        EDIT,
        BASH,
        GREP,
        GLOB,
        # Background jobs of bash (TOOLS.md, "Background jobs").
        BASH_OUTPUT,
        KILL_SHELL,
    )
}
TOOL_NAMES: tuple[str, ...] = tuple(SPECS)

#: bash's own limit, in seconds: what transports wait for before they give up on a call.
BASH_MAX_TIMEOUT_S = BASH_MAX_TIMEOUT_MS / 1000

_SCHEMAS = {name: json_schema(spec) for name, spec in SPECS.items()}


def input_schema(name: str) -> dict[str, Any]:
    """The tool's argument schema (a fresh copy: callers may adapt it)."""
    return copy.deepcopy(_SCHEMAS[name])


def description(name: str) -> str:
    return SPECS[name].description


def read_only(name: str) -> bool:
    """Whether the tool only looks (changes nothing in the workspace)."""
    return SPECS[name].read_only

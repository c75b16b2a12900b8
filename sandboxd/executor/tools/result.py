"""The one result shape every tool returns.

``text`` is what the model reads; ``fields`` carries the same facts for
programs (counts, truncation, exit code...) so nobody parses ``text``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Cross-cutting rule of TOOLS.md: no tool text exceeds this many characters.
MAX_TEXT_CHARS = 30_000


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    fields: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "text": valid_utf8(self.text),
            "is_error": self.is_error,
            "fields": {key: _valid_value(value) for key, value in self.fields.items()},
        }


def valid_utf8(text: str) -> str:
    """``text`` without lone surrogates, so any transport can encode it.

    File names that are not UTF-8 arrive from the OS as surrogate escapes;
    they are shown with U+FFFD rather than breaking the result.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", errors="surrogateescape" if _escapes_only(text) else "replace")
        return raw.decode("utf-8", errors="replace")
    return text


def _escapes_only(text: str) -> bool:
    return all(not 0xD800 <= ord(c) < 0xDC80 and not 0xDD00 <= ord(c) < 0xE000 for c in text)


def _valid_value(value: object) -> object:
    if isinstance(value, str):
        return valid_utf8(value)
    if isinstance(value, list):
        return [_valid_value(item) for item in value]
    return value


def ok(text: str, **fields: object) -> ToolResult:
    return ToolResult(text, False, fields)


def error(text: str, **fields: object) -> ToolResult:
    # Every model-facing failure starts the same way so a model (and a test)
    # can recognise it without looking at is_error.
    if not text.startswith("Error: "):
        text = "Error: " + text
    return ToolResult(text, True, fields)


class ToolError(Exception):
    """Raised inside a tool to abort with a model-facing error result.

    It never leaves ``ToolSession.run``: the session turns it into an
    ``is_error`` result. It lets deep helpers (path checks, argument parsing)
    stop a tool without threading result values through every caller.
    """

    def __init__(self, text: str, **fields: object) -> None:
        super().__init__(text)
        self.result = error(text, **fields)

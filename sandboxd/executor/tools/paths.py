"""Path rules shared by the tools: resolution, display, "did you mean".

Input paths are absolute or relative to the instance working directory.
Output paths are relative to the working directory when inside it, absolute
otherwise, so a path in one tool's output can be fed to any other tool.
"""

from __future__ import annotations

import difflib
import os
import shlex

from .result import ToolError


def resolve(workdir: str, raw: str, param: str = "file_path") -> str:
    """Absolute, normalised path for ``raw``; bad input raises ``ToolError``."""
    if raw == "" or raw.strip() == "":
        raise ToolError(f"{param} is empty. Give a path relative to {workdir}, or an absolute one.")
    if "\x00" in raw:
        raise ToolError(f"{param} contains a NUL byte, which no path can contain. Remove it.")
    joined = raw if os.path.isabs(raw) else os.path.join(workdir, raw)
    return os.path.normpath(joined)


def display(workdir: str, path: str) -> str:
    if path == workdir:
        return "."
    prefix = workdir if workdir.endswith("/") else workdir + "/"
    if path.startswith(prefix):
        return path[len(prefix) :]
    return path


def place(workdir: str, path: str) -> str:
    """A folder as the object of a sentence ("in src", "in /workspace")."""
    return workdir if path == workdir else display(workdir, path)


def shell_quote(text: str) -> str:
    return shlex.quote(text)


def similar_names(workdir: str, path: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` existing paths whose name resembles the missing one.

    Looks in the nearest existing ancestor folder, for names close to the
    first missing component, because that is where a typo usually is.
    """
    parent, name = os.path.split(path)
    while parent and not os.path.isdir(parent):
        parent, name = os.path.split(parent)
    try:
        entries = os.listdir(parent or "/")
    except OSError:
        return []
    entries = [e for e in entries if e != ".git"]
    close = difflib.get_close_matches(name, entries, n=limit, cutoff=0.6)
    if len(close) < limit:
        # Same name, other case or extension: difflib's ratio misses those
        # when the names are short.
        stem = os.path.splitext(name)[0].lower()
        for entry in sorted(entries):
            if entry not in close and stem and os.path.splitext(entry)[0].lower() == stem:
                close.append(entry)
            if len(close) >= limit:
                break
    return [display(workdir, os.path.join(parent, e)) for e in close]


def not_found(workdir: str, path: str, what: str, hint: str) -> str:
    """The text of a not-found error: what, where, similar names, next step."""
    text = f"{what} not found: {display(workdir, path)} (working directory: {workdir})."
    close = similar_names(workdir, path)
    if close:
        text += " Similar names: " + ", ".join(close) + "."
    return text + " " + hint


def list_entries(path: str, limit: int) -> tuple[list[str], int]:
    """First ``limit`` entries of a folder, sorted, folders ending in ``/``."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return [], 0
    shown = []
    for name in names[:limit]:
        shown.append(name + "/" if os.path.isdir(os.path.join(path, name)) else name)
    return shown, len(names)

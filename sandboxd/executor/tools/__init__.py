"""The six agent tools — ``read``, ``write``, ``edit``, ``bash``, ``grep``,
``glob`` — exactly as /shared/TOOLS.md specifies them.

One implementation, standard library only: it runs inside each workspace
container (shipped there with the executor) and in-process for the local
backend, so every backend gives byte-identical text.

Modules, one job each::

    session     ToolSession: per-instance state, dispatch, the 30,000 cap
    context     what a tool call sees of its session
    result      the result shape (text, is_error, fields) and ToolError
    args        parse: aliases, coercion, unknown keys, range checks (the
                specs themselves are sandboxd.contract.tools)
    paths       resolve/display paths, "similar names", folder listings
    text        BOM/CRLF round trips, line counts, cat -n
    fsio        atomic replace, errno texts
    locks       FIFO locks (per path for write/edit, per session for bash)
    readstate   the read-before-write guard (content hashes, short diffs)
    read, write, edit (+ matching: the five match levels)
    bash (+ output: ANSI/CR cleaning, bounded head/tail capture)
    grep (+ grep_model, grep_rg, grep_py, grep_types)
    glob (+ globpat, gitignore, walk)

Each tool module's docstring lists the structured fields it returns.
"""

from __future__ import annotations

from .session import ToolSession

__all__ = ["ToolSession"]

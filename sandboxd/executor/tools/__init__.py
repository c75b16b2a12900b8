"""The six agent tools — ``read``, ``write``, ``edit``, ``bash``, ``grep``,
``glob`` — exactly as /shared/TOOLS.md specifies them.

One implementation, standard library only: it runs inside each workspace
container (shipped there with the executor) and in-process for the local
backend, so every backend gives byte-identical text.

Modules, one job each::

    session    ToolSession: per-instance state and dispatch
    args       aliases, coercion, unknown keys      result   the result shape
    paths      resolve/display paths, similar names text     BOM/CRLF, cat -n
    fsio       atomic writes, errno texts           locks    FIFO locks
    readstate  the read-before-write guard          context  what a tool sees
    read write edit (+ matching) bash (+ output) grep (+ grep_rg, grep_py)
    glob (+ globpat, gitignore, walk)
"""

from __future__ import annotations

from .session import TOOL_NAMES, ToolSession

__all__ = ["TOOL_NAMES", "ToolSession"]

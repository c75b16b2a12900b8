"""``ToolSession``: the per-instance state of the six tools, and dispatch."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping

from sandboxd.errors import Internal, InvalidArgument

from . import bash, edit, glob, grep, read, write
from .args import ToolSpec
from .context import Context
from .locks import PathLocks
from .readstate import ReadState
from .result import MAX_TEXT_CHARS, ToolError, ToolResult, error

#: Every tool's contract, in TOOLS.md order: the one list of tools. A new tool
#: adds its module's SPEC here and its handler in ``ToolSession``.
SPECS: dict[str, ToolSpec] = {
    module.SPEC.tool: module.SPEC for module in (read, write, edit, bash, grep, glob)
}
TOOL_NAMES: tuple[str, ...] = tuple(SPECS)

_Handler = Callable[[dict[str, object], threading.Event], ToolResult]


def _capped(result: ToolResult) -> ToolResult:
    """Last line of defence for the 30,000-character cap.

    Every tool budgets its own text; this only catches what slipped through
    (an unusually long error message), so nothing oversize reaches a model.
    """
    if len(result.text) <= MAX_TEXT_CHARS:
        return result
    notice = "\n[... cut: this result exceeded 30,000 characters ...]"
    text = result.text[: MAX_TEXT_CHARS - len(notice)] + notice
    return ToolResult(text, result.is_error, dict(result.fields, truncated=True))


class ToolSession:
    """Per-instance tool state: read state, bash cwd/env, background jobs.

    ``run`` is safe to call from many threads at once: read/grep/glob run in
    parallel, write/edit to one path queue in arrival order, bash calls of
    the session run one at a time (see ``locks``).
    """

    def __init__(
        self,
        workdir: str,
        *,
        state_dir: str,
        read_guard: bool = True,
        path_locks: PathLocks | None = None,
    ) -> None:
        workdir = os.path.normpath(os.path.abspath(workdir))
        state_dir = os.path.normpath(os.path.abspath(state_dir))
        os.makedirs(state_dir, exist_ok=True)
        os.makedirs(workdir, exist_ok=True)
        self.context = Context(
            workdir=workdir,
            state_dir=state_dir,
            read_state=ReadState(read_guard),
            # Shared with the executor's write_file when given, so the tools and
            # the low-level verbs queue on one lock per path.
            path_locks=path_locks or PathLocks(),
        )
        self.shell = bash.Shell(workdir, state_dir)
        ctx = self.context
        self._handlers: dict[str, _Handler] = {
            "read": lambda args, cancel: read.run(ctx, args),
            "write": lambda args, cancel: write.run(ctx, args),
            "edit": lambda args, cancel: edit.run(ctx, args),
            "bash": self.shell.run,
            "grep": lambda args, cancel: grep.run(ctx, args, cancel),
            "glob": lambda args, cancel: glob.run(ctx, args, cancel),
        }

    @property
    def workdir(self) -> str:
        return self.context.workdir

    def run(
        self,
        name: str,
        args: Mapping[str, object],
        *,
        cancel: threading.Event | None = None,
    ) -> dict[str, object]:
        handler = self._handlers.get(name)
        if handler is None:
            raise InvalidArgument(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
        if not isinstance(args, Mapping):
            return error(f"the arguments of {name} must be an object.").to_dict()
        try:
            result = handler(dict(args), cancel or threading.Event())
        except ToolError as exc:
            result = exc.result
        except BlockingIOError:
            result = error(
                f"{name} could not start a process: the sandbox has reached its process limit. "
                "Stop background jobs or processes you started, or have the sandbox restarted."
            )
        except OSError as exc:
            # Races with other processes (a file vanishing between two
            # checks) are the model's to handle, not a daemon failure.
            result = error(f"{name} failed: {exc.strerror or exc} ({exc.filename or ''}).")
        except Exception as exc:
            raise Internal(f"{name} tool failed unexpectedly: {exc!r}") from exc
        return _capped(result).to_dict()

    def close(self) -> None:
        self.shell.close()

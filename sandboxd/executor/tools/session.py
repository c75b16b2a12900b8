"""``ToolSession``: the per-instance state of the six tools, and dispatch."""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Mapping

from sandboxd.contract.errors import Internal, InvalidArgument
from sandboxd.contract.tools import TOOL_NAMES

from . import bash, edit, glob, grep, read, write
from .context import Context
from .locks import PathLocks
from .readstate import ReadState
from .result import MAX_TEXT_CHARS, ToolError, ToolResult, error

_Handler = Callable[[dict[str, object], threading.Event, Context], ToolResult]


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
        env: Mapping[str, str] | None = None,
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
        self.shell = bash.Shell(workdir, state_dir, env=env)
        self._handlers: dict[str, _Handler] = {
            "read": lambda args, cancel, ctx: read.run(ctx, args),
            "write": lambda args, cancel, ctx: write.run(ctx, args),
            "edit": lambda args, cancel, ctx: edit.run(ctx, args),
            "bash": self._bash,
            "grep": lambda args, cancel, ctx: grep.run(ctx, args, cancel),
            "glob": lambda args, cancel, ctx: glob.run(ctx, args, cancel),
            "bash_output": lambda args, cancel, ctx: self.shell.jobs.output(args),
            "kill_shell": lambda args, cancel, ctx: self.shell.jobs.kill(args),
        }

    def _bash(self, args: dict[str, object], cancel: threading.Event, ctx: Context) -> ToolResult:
        start = ctx.workdir if ctx is not self.context else None
        return self.shell.run(args, cancel, start=start)

    def _context_for(self, cwd: str | None) -> Context | ToolResult:
        """The call's context: the session's own, or one rooted at ``cwd``.

        ``cwd`` follows the rules of any path argument (absolute, or relative
        to the workdir). Read state and path locks stay shared, so a folder
        changes only how paths are spelled, never what guards them.
        """
        if not cwd:
            return self.context
        if "\x00" in cwd:
            raise InvalidArgument("cwd contains a NUL byte")
        folder = os.path.normpath(os.path.join(self.context.workdir, cwd))
        if not os.path.isdir(folder):
            what = "is not a folder" if os.path.exists(folder) else "does not exist"
            return error(
                f"the working folder {folder} {what}. Create it (mkdir -p {folder}) or "
                "run from another folder."
            )
        return dataclasses.replace(self.context, workdir=folder)

    @property
    def workdir(self) -> str:
        return self.context.workdir

    def run(
        self,
        name: str,
        args: Mapping[str, object],
        *,
        cancel: threading.Event | None = None,
        cwd: str | None = None,
    ) -> dict[str, object]:
        handler = self._handlers.get(name)
        if handler is None:
            raise InvalidArgument(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
        if not isinstance(args, Mapping):
            return error(f"the arguments of {name} must be an object.").to_dict()
        ctx = self._context_for(cwd)
        if isinstance(ctx, ToolResult):
            return ctx.to_dict()
        try:
            result = handler(dict(args), cancel or threading.Event(), ctx)
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

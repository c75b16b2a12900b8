"""The three subjects of the per-operation table, each exposing the same ops.

An op is a no-argument coroutine function doing one call; it raises when
the call did not do what it should, so a broken subject cannot look fast.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import docker
from docker.models.containers import Container
from docker.types import Mount

from bench import fixtures as fx
from bench.resources import IMAGE
from bench.stats import Op
from runtime_client import Sandbox, SandboxToolResult
from sandboxd.daemon.settings import Settings
from sandboxd.executor.tools import ToolSession

#: op name -> (tool, arguments). The edit args are the first of two that alternate.
TOOL_OPS: dict[str, tuple[str, dict[str, Any]]] = {
    "read 1 KiB": ("read", {"file_path": fx.READ_FILE}),
    "write 1 KiB": ("write", {"file_path": fx.WRITE_FILE, "content": fx.KIB_TEXT}),
    "edit 1 line": ("edit", {"file_path": fx.EDIT_FILE}),
    "bash true": ("bash", {"command": "true"}),
    fx.PACED_BASH: ("bash", {"command": "true"}),
    "grep 1k files": ("grep", {"pattern": fx.GREP_PATTERN, "path": fx.TREE_1K}),
    "glob 1k files": ("glob", {"pattern": fx.GLOB_PATTERN, "path": fx.TREE_1K}),
    "glob small dir": ("glob", {"pattern": "*.py", "path": fx.SMALL}),
}


def _flip() -> Any:
    """Edit arguments that alternate a -> b, b -> a, so every call replaces a line."""
    state = {"forward": True}

    def next_args() -> dict[str, Any]:
        old, new = (fx.EDIT_A, fx.EDIT_B) if state["forward"] else (fx.EDIT_B, fx.EDIT_A)
        state["forward"] = not state["forward"]
        return {"file_path": fx.EDIT_FILE, "old_string": old, "new_string": new}

    return next_args


def _check(name: str, result: Mapping[str, Any] | SandboxToolResult) -> None:
    is_error = (
        result.is_error if isinstance(result, SandboxToolResult) else bool(result.get("is_error"))
    )
    text = result.text if isinstance(result, SandboxToolResult) else str(result.get("text"))
    if is_error:
        raise RuntimeError(f"{name} failed: {text[:300]}")


# ---------------------------------------------------------------- sandboxd


class SandboxdSubject:
    name = "sandboxd"

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def setup(self) -> None:
        result = await self.sandbox.bash(fx.setup_shell(), timeout=300_000)
        _check("setup", result)
        for path in (fx.READ_FILE, fx.WRITE_FILE, fx.EDIT_FILE):
            _check("setup read", await self.sandbox.read(path))

    def ops(self) -> dict[str, Op]:
        ops: dict[str, Op] = {}
        for label, (tool, args) in TOOL_OPS.items():
            ops[label] = self._op(label, tool, args)
        return ops

    def _op(self, label: str, tool: str, args: dict[str, Any]) -> Op:
        sandbox = self.sandbox
        if tool == "edit":
            flip = _flip()

            async def edit() -> None:
                _check(label, await sandbox.call_tool("edit", flip()))

            return edit

        async def call() -> None:
            _check(label, await sandbox.call_tool(tool, args))

        return call


class SandboxdVerbsSubject:
    """The low-level API (no model-facing text): what a program's adapter pays."""

    name = "sandboxd verbs"

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def ops(self) -> dict[str, Op]:
        sandbox = self.sandbox
        kib = fx.KIB_TEXT.encode()

        async def read() -> None:
            if not (await sandbox.read_file(fx.READ_FILE)).data:
                raise RuntimeError("read_file returned nothing")

        async def write() -> None:
            await sandbox.write_file(fx.WRITE_FILE, kib)

        flip = _flip()

        async def edit() -> None:
            # What an adapter does for an edit: read, replace, compare-and-swap write.
            args = flip()
            current = (await sandbox.read_file(fx.EDIT_FILE)).data
            new = current.replace(args["old_string"].encode(), args["new_string"].encode(), 1)
            await sandbox.write_file(
                fx.EDIT_FILE, new, expected_sha256=hashlib.sha256(current).hexdigest()
            )

        def command(argv: list[str]) -> Op:
            async def run() -> None:
                result = await sandbox.exec(argv)
                if result.exit_code != 0:
                    raise RuntimeError(f"{argv} exited {result.exit_code}: {result.stderr[:300]!r}")

            return run

        return {
            "read 1 KiB": read,
            "write 1 KiB": write,
            "edit 1 line": edit,
            "bash true": command(["bash", "-c", "true"]),
            fx.PACED_BASH: command(["bash", "-c", "true"]),
            "grep 1k files": command(["rg", "-l", fx.GREP_PATTERN, fx.TREE_1K]),
            "glob 1k files": command(["rg", "--files", "-g", "*.py", fx.TREE_1K]),
            "glob small dir": command(["rg", "--files", "-g", "*.py", fx.SMALL]),
        }


# ---------------------------------------------------------------- floor


#: Tools whose work spreads over cores (ripgrep's parallel search); the rest
#: run on one thread, so the budget (two syscalls a call) is left off them.
MULTICORE_TOOLS = frozenset({"grep"})


@functools.cache
def _sandbox_cores() -> int:
    return max(1, math.ceil(Settings().cpus))


@contextlib.contextmanager
def sandbox_cpu_budget() -> Iterator[None]:
    """The calling thread (and what it spawns) on as many cores as a sandbox may use.

    A sandbox gets ``cpus`` (default 1.0) through its CPU quota; the floor on
    the host would otherwise have every core, and ripgrep's parallel search
    would make it faster by hardware, not by lacking sandboxd.
    """
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[: _sandbox_cores()])
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


class FloorSubject:
    """The same tool code in-process on a host folder: no daemon, no gRPC, no container.

    Tools that use several cores run with the sandbox's CPU budget
    (``sandbox_cpu_budget``).
    """

    name = "floor"

    def __init__(self, root: Path) -> None:
        self.workdir = root / "workspace"
        self.session = ToolSession(str(self.workdir), state_dir=str(root / "state"))

    async def setup(self) -> None:
        _check("setup", self.session.run("bash", {"command": fx.setup_shell(), "timeout": 300_000}))
        for path in (fx.READ_FILE, fx.WRITE_FILE, fx.EDIT_FILE):
            _check("setup read", self.session.run("read", {"file_path": path}))

    def ops(self) -> dict[str, Op]:
        return {label: self._op(label, tool, args) for label, (tool, args) in TOOL_OPS.items()}

    def _op(self, label: str, tool: str, args: dict[str, Any]) -> Op:
        session = self.session
        if tool == "edit":
            flip = _flip()

            async def edit() -> None:
                _check(label, session.run("edit", flip()))

            return edit

        if tool in MULTICORE_TOOLS:

            async def budgeted() -> None:
                with sandbox_cpu_budget():
                    _check(label, session.run(tool, args))

            return budgeted

        async def call() -> None:
            _check(label, session.run(tool, args))

        return call

    def close(self) -> None:
        self.session.close()


# ---------------------------------------------------------------- raw docker exec


class RawExecSubject:
    """A container of the same image and isolation; every op is one ``exec_run``."""

    name = "raw exec"

    def __init__(self, client: docker.DockerClient, labels: dict[str, str], name: str) -> None:
        self.client = client
        self.labels = labels
        self.name_prefix = name
        self.container: Container | None = None

    def start(self) -> None:
        volume = self.client.volumes.create(name=self.name_prefix, labels=self.labels)
        self.container = self.client.containers.run(
            IMAGE,
            command=["sleep", "infinity"],
            name=self.name_prefix,
            labels=self.labels,
            detach=True,
            init=True,
            user="1000:1000",
            working_dir="/workspace",
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            tmpfs={"/tmp": "rw,nosuid,nodev,size=268435456,mode=1777"},
            mounts=[Mount(target="/workspace", source=volume.name, type="volume")],
            mem_limit=1 << 30,
            nano_cpus=int(1e9),
            pids_limit=512,
        )

    def run(self, argv: list[str]) -> bytes:
        assert self.container is not None
        code, output = self.container.exec_run(argv, user="1000:1000", workdir="/workspace")
        if code != 0:
            raise RuntimeError(f"raw exec {shlex.join(argv)[:200]} exited {code}: {output[:300]!r}")
        return bytes(output)

    async def setup(self) -> None:
        self.run(["bash", "-c", fx.setup_shell()])

    def ops(self) -> dict[str, Op]:
        argvs: dict[str, list[str]] = {
            "read 1 KiB": ["cat", fx.READ_FILE],
            "write 1 KiB": ["sh", "-c", 'printf %s "$1" > "$2"', "sh", fx.KIB_TEXT, fx.WRITE_FILE],
            "bash true": ["bash", "-c", "true"],
            fx.PACED_BASH: ["bash", "-c", "true"],
            "grep 1k files": ["rg", "-l", fx.GREP_PATTERN, fx.TREE_1K],
            "glob 1k files": ["rg", "--files", "-g", "*.py", fx.TREE_1K],
            "glob small dir": ["rg", "--files", "-g", "*.py", fx.SMALL],
        }
        ops: dict[str, Op] = {label: self._op(argv) for label, argv in argvs.items()}
        flip = _flip()

        async def edit() -> None:
            args = flip()
            self.run(["sed", "-i", f"s/{args['old_string']}/{args['new_string']}/", fx.EDIT_FILE])

        ops["edit 1 line"] = edit
        return {label: ops[label] for label in TOOL_OPS}

    def _op(self, argv: list[str]) -> Op:
        async def call() -> None:
            self.run(argv)

        return call

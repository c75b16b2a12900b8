"""The SWE-ReX peer, run by the tools venv's python (it imports ``swerex``).

    python -m bench.swerex_peer '<json config>'   ->  JSON results on stdout

SWE-ReX's Docker deployment: ``docker run -p <port>:8000`` of an image with
``swerex-remote`` (a FastAPI server), then HTTP calls from ``RemoteRuntime``.
Its bash is one persistent pexpect session; it has no edit/grep/glob tools,
so those run as commands in that session (what SWE-agent does).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from swerex.deployment.docker import DockerDeployment  # type: ignore[import-not-found]
from swerex.runtime.abstract import (  # type: ignore[import-not-found]
    BashAction,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    WriteFileRequest,
)

from bench import fixtures as fx
from bench.stats import Op, time_op


async def main(config: dict[str, Any]) -> dict[str, Any]:
    docker_args = [
        "--label", f"{config['label']}={config['run_id']}",
        "--read-only",
        "--tmpfs", "/tmp:rw,nosuid,nodev,size=268435456,mode=1777",
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--user", "1000:1000",
        "--workdir", "/workspace",
        "--env", "HOME=/tmp",
        "--mount", f"type=volume,src={config['volume']},dst=/workspace",
        "--memory", "1g", "--cpus", "1", "--pids-limit", "512", "--init",
    ]  # fmt: skip
    deployment = DockerDeployment(
        image=config["image"], pull="never", python_standalone_dir=None, docker_args=docker_args
    )
    start = time.perf_counter()
    await deployment.start()
    started_ms = (time.perf_counter() - start) * 1000
    try:
        runtime = deployment.runtime
        await runtime.create_session(CreateBashSessionRequest())
        setup = await runtime.execute(
            Command(command=fx.setup_shell(), shell=True, timeout=300, cwd="/workspace")
        )
        if setup.exit_code != 0:
            raise RuntimeError(f"setup failed: {setup.stderr[:300]}")
        await runtime.run_in_session(BashAction(command="cd /workspace"))

        def in_session(command: str) -> Op:
            async def call() -> None:
                out = await runtime.run_in_session(BashAction(command=command, check="raise"))
                del out

            return call

        async def read() -> None:
            await runtime.read_file(ReadFileRequest(path=f"/workspace/{fx.READ_FILE}"))

        async def write() -> None:
            await runtime.write_file(
                WriteFileRequest(path=f"/workspace/{fx.WRITE_FILE}", content=fx.KIB_TEXT)
            )

        forward = [True]

        async def edit() -> None:
            old, new = (fx.EDIT_A, fx.EDIT_B) if forward[0] else (fx.EDIT_B, fx.EDIT_A)
            forward[0] = not forward[0]
            await in_session(f"sed -i 's/{old}/{new}/' {fx.EDIT_FILE}")()

        ops: dict[str, Op] = {
            "read 1 KiB": read,
            "write 1 KiB": write,
            "edit 1 line": edit,
            "bash true": in_session("true"),
            fx.PACED_BASH: in_session("true"),
            "grep 1k files": in_session(f"rg -l '{fx.GREP_PATTERN}' {fx.TREE_1K} >/dev/null"),
            "glob 1k files": in_session(f"rg --files -g '*.py' {fx.TREE_1K} >/dev/null"),
            "glob small dir": in_session(f"rg --files -g '*.py' {fx.SMALL} >/dev/null"),
        }

        def executed(command: str) -> Op:
            # SWE-ReX's other mode: a fresh subprocess per command, no session
            # (and no 0.1 s settle time); what a fast SWE-ReX adapter would use.
            async def call() -> None:
                out = await runtime.execute(Command(command=command, shell=True, cwd="/workspace"))
                if out.exit_code != 0:
                    raise RuntimeError(f"{command[:80]} exited {out.exit_code}")

            return call

        def sed_edit() -> str:
            old, new = (fx.EDIT_A, fx.EDIT_B) if forward[0] else (fx.EDIT_B, fx.EDIT_A)
            forward[0] = not forward[0]
            return f"sed -i 's/{old}/{new}/' {fx.EDIT_FILE}"

        async def edit_executed() -> None:
            await executed(sed_edit())()

        execute_ops: dict[str, Op] = {
            "read 1 KiB": read,
            "write 1 KiB": write,
            "edit 1 line": edit_executed,
            "bash true": executed("true"),
            fx.PACED_BASH: executed("true"),
            "grep 1k files": executed(f"rg -l '{fx.GREP_PATTERN}' {fx.TREE_1K} >/dev/null"),
            "glob 1k files": executed(f"rg --files -g '*.py' {fx.TREE_1K} >/dev/null"),
            "glob small dir": executed(f"rg --files -g '*.py' {fx.SMALL} >/dev/null"),
        }
        fast, slow = config["fast"], config["slow"]
        results = {}
        results_execute = {}
        for name, op in ops.items():
            paced = name in fx.PAUSE_S
            warmup, n = slow if paced or name.startswith(("grep", "glob 1k")) else fast
            pause = fx.PAUSE_S.get(name, 0.0)
            results[name] = (await time_op(op, warmup=warmup, n=n, pause=pause)).to_json()
            results_execute[name] = (
                await time_op(execute_ops[name], warmup=warmup, n=n, pause=pause)
            ).to_json()

        async def execute_true() -> None:
            await runtime.execute(Command(command=["true"]))

        extra = (await time_op(execute_true, warmup=fast[0], n=fast[1])).to_json()
        return {
            "ops": results,
            "ops_execute": results_execute,
            "execute_true": extra,
            "start_ms": round(started_ms, 1),
        }
    finally:
        await deployment.stop()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))

"""A scripted agent that writes a file, edits it, runs it, greps it, and reports.

    python examples/scripted_agent.py --target unix:///run/sandboxd/sandboxd.sock
    python examples/scripted_agent.py --local /tmp/agents

Both print the same transcript: the agent's tools behave the same whichever
sandbox backend serves them. ``ScriptedModel`` stands in for a language model;
swap it for ``OpenAIChatModel("gpt-4.1")`` to let a real one drive.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets

from pydantic import BaseModel

from runtime_client import (
    Agent,
    GrpcSandboxFactory,
    LocalSandboxFactory,
    SandboxFactory,
    ScriptedModel,
    ToolContext,
    ToolResult,
    define_tool,
)


class Report(BaseModel):
    summary: str


async def report(ctx: ToolContext[Report]) -> ToolResult:
    ctx.log(ctx.data.summary)  # the application sees this, the model does not
    return ToolResult(output={"received": True}, terminate=True)


REPORT = define_tool(
    name="report",
    description="Report the outcome of the task to the user; ends the run.",
    input=Report,
    run=report,
)

SCRIPT = [
    [("write", {"file_path": "greet.py", "content": 'NAME = "world"\nprint("Hello, " + NAME)\n'})],
    [
        (
            "edit",
            {
                "file_path": "greet.py",
                "old_string": '"Hello, " + NAME',
                "new_string": 'f"Hello, {NAME}!"',
            },
        )
    ],
    [("bash", {"command": "python3 greet.py", "description": "run the script"})],
    # Two calls in one turn run concurrently: grep and glob only read.
    [("grep", {"pattern": "NAME", "output_mode": "content"}), ("glob", {"pattern": "*.py"})],
    [("report", {"summary": "greet.py prints Hello, world!"})],
]


def make_agent(factory: SandboxFactory) -> Agent:
    return Agent(
        model=ScriptedModel(SCRIPT),
        instructions="You are a careful coding agent. Use the tools; report when done.",
        tools=[REPORT],
        sandbox=factory,
        on_log=lambda line: print(f"[log] {line.tool_name}: {line.message}"),
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description="Run a scripted agent in a sandbox.")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--target", help="sandboxd gRPC target, e.g. unix:///run/sandboxd/sandboxd.sock"
    )
    where.add_argument("--local", metavar="DIR", help="run in a folder on this host (no isolation)")
    parser.add_argument("--instance", default=f"scripted-{secrets.token_hex(4)}")
    parser.add_argument("--keep", action="store_true", help="keep the workspace afterwards")
    args = parser.parse_args()

    factory = GrpcSandboxFactory(args.target) if args.target else LocalSandboxFactory(args.local)
    async with factory:
        run = await make_agent(factory).run("Write greet.py and run it.", instance_id=args.instance)
        print(run.transcript(), end="")
        print(f"stop: {run.stop_reason} after {run.turns} turns")
        if run.sandbox is not None and not args.keep:
            await run.sandbox.delete()


if __name__ == "__main__":
    asyncio.run(main())

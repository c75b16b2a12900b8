"""``sandboxctl snapshot create|list|delete|restore``: named snapshots.

sandboxctl snapshot create agent-1 before-refactor
sandboxctl snapshot restore agent-1 before-refactor
sandboxctl create agent-2 --from-snapshot before-refactor
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from runtime_client.factories import GrpcSandboxFactory
from sandboxd.contract.models import ForkResult, SnapshotInfo
from sandboxd.ctl import render
from sandboxd.ctl.connect import connection_of, run

app = typer.Typer(help="Named snapshots of a sandbox's files: create, list, delete, restore.")
out = Console()

InstanceId = Annotated[str, typer.Argument(help="instance id, e.g. agent-42")]
Name = Annotated[str, typer.Argument(help="the snapshot's name")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of text")]


def copied_json(result: ForkResult) -> dict[str, Any]:
    """A restore's or a create-from-snapshot's answer (a fork's shape)."""
    return {
        "sandbox": render.info_json(result.sandbox),
        "method": result.method,
        "duration_ms": result.duration_ms,
    }


@app.command()
def create(
    ctx: typer.Context, instance_id: InstanceId, name: Name, as_json: JsonFlag = False
) -> None:
    """Snapshot an instance's files (frozen while they are copied) under NAME."""

    async def action(factory: GrpcSandboxFactory) -> SnapshotInfo:
        return await factory.transport.create_snapshot(instance_id, name)

    snapshot = run(connection_of(ctx), action)
    if as_json:
        typer.echo(json.dumps(snapshot.to_json(), indent=2))
    else:
        out.print(
            f"snapshot {name} of {instance_id}: {snapshot.size_bytes} bytes "
            f"({snapshot.method}, {snapshot.duration_ms} ms)",
            highlight=False,
        )


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List this token's snapshots."""

    async def action(factory: GrpcSandboxFactory) -> list[SnapshotInfo]:
        return await factory.transport.list_snapshots()

    found = run(connection_of(ctx), action)
    if as_json:
        typer.echo(json.dumps([s.to_json() for s in found]))
        return
    table = Table("NAME", "SOURCE", "BYTES", "CREATED", box=None)
    for snapshot in found:
        table.add_row(
            snapshot.name,
            snapshot.source_id,
            str(snapshot.size_bytes),
            render.when(snapshot.created_at_ms),
        )
    out.print(table)


@app.command()
def delete(ctx: typer.Context, names: Annotated[list[str], typer.Argument()]) -> None:
    """Delete snapshots."""

    async def action(factory: GrpcSandboxFactory) -> None:
        for name in names:
            await factory.transport.delete_snapshot(name)
            out.print(f"deleted snapshot {name}", highlight=False)

    run(connection_of(ctx), action)


@app.command()
def restore(
    ctx: typer.Context, instance_id: InstanceId, name: Name, as_json: JsonFlag = False
) -> None:
    """Replace an instance's files by snapshot NAME's (its processes restart)."""

    async def action(factory: GrpcSandboxFactory) -> ForkResult:
        return await factory.transport.restore_snapshot(instance_id, name)

    result = run(connection_of(ctx), action)
    if as_json:
        typer.echo(json.dumps(copied_json(result), indent=2))
    else:
        out.print(
            f"restored {instance_id} from {name} ({result.method}, {result.duration_ms} ms)",
            highlight=False,
        )

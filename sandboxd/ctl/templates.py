"""``sandboxctl template build|from-snapshot``: images for sandboxes, built by
the daemon. The build's log goes to stderr as it comes, the image's tag to
stdout, so it composes:

sandboxctl template build ./tpl
sandboxctl create agent-1 --image "$(sandboxctl template build ./tpl)"
sandboxctl template from-snapshot before-refactor
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from runtime_client.factories import GrpcSandboxFactory
from runtime_client.templates import build_template, template_from_snapshot
from sandboxd.contract.models import TemplateInfo
from sandboxd.ctl.connect import connection_of, run

app = typer.Typer(
    help="Templates: images sandboxes are created from (--image), built by the daemon "
    "from a Dockerfile and its folder, or from a snapshot."
)

JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of the tag")]
QuietFlag = Annotated[
    bool, typer.Option("--quiet", "-q", help="do not print the build's log (stderr)")
]


def _log(quiet: bool) -> Callable[[str], None] | None:
    if quiet:
        return None
    return lambda line: print(line, file=sys.stderr, flush=True)


def _print(template: TemplateInfo, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(template), indent=2))
        return
    how = "cached: nothing ran" if template.cached else f"built in {template.duration_ms} ms"
    print(f"template {template.image} ({how}, {template.size_bytes} bytes)", file=sys.stderr)
    typer.echo(template.image)


@app.command()
def build(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            exists=True, file_okay=False, help="the build's folder: its Dockerfile and files"
        ),
    ],
    dockerfile: Annotated[
        str, typer.Option(help="the Dockerfile's path inside the folder")
    ] = "Dockerfile",
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Build PATH's Dockerfile into a template (the same files again: cached at once)."""

    async def action(factory: GrpcSandboxFactory) -> TemplateInfo:
        return await build_template(factory.transport, path, dockerfile=dockerfile, log=_log(quiet))

    _print(run(connection_of(ctx), action), as_json)


@app.command("from-snapshot")
def from_snapshot(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="the snapshot's name")],
    quiet: QuietFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """A template of snapshot NAME: its sandbox's image with the snapshot's files."""

    async def action(factory: GrpcSandboxFactory) -> TemplateInfo:
        return await template_from_snapshot(factory.transport, name, log=_log(quiet))

    _print(run(connection_of(ctx), action), as_json)

"""The ``sandboxctl`` commands.

    sandboxctl create agent-1
    sandboxctl bash agent-1 'ls -la'
    sandboxctl exec agent-1 -- python3 -c 'print(42)'
    sandboxctl status
    sandboxctl cp ./repo agent-1:/workspace/repo     # and back: cp agent-1:out ./out
    sandboxctl fork agent-1 agent-1-try2
    sandboxctl snapshot create agent-1 clean          # then: snapshot restore|list|delete
    sandboxctl template build ./tpl                   # prints the image: create --image it
    sandboxctl extend agent-1 3600                    # it ends an hour from now
    sandboxctl port-forward agent-1 8080:8000         # curl localhost:8080, until ^C

Tool commands print the tool's text and exit 1 when it is an error result;
``exec`` exits with the command's own status; a sandboxd failure exits 125.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from runtime_client.factories import DEFAULT_TARGET, GrpcSandboxFactory
from runtime_client.sandbox import Sandbox
from sandboxd.contract.models import (
    ExecExit,
    ExecOutput,
    NetworkPolicy,
    SandboxInfo,
    SandboxOptions,
    SandboxToolResult,
    SkippedLink,
)
from sandboxd.contract.network import MODES, RULE_DESCRIPTION, from_flags
from sandboxd.contract.secrets import Secret, SecretValue
from sandboxd.contract.tools import BASH_MAX_TIMEOUT_MS, BASH_MIN_TIMEOUT_MS
from sandboxd.ctl import render, snapshots, templates
from sandboxd.ctl.connect import Connection, fail, health, run
from sandboxd.ctl.shell import interactive

app = typer.Typer(
    name="sandboxctl",
    help="Drive a sandboxd daemon: instances, the six tools, streaming exec, status.",
    no_args_is_help=True,
    add_completion=False,
)
# Progress and errors go to stderr, so stdout stays the tool's or command's output.
err = Console(stderr=True)
out = Console()

InstanceId = Annotated[str, typer.Argument(help="instance id, e.g. agent-42")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of text")]
NetworkModeOption = Annotated[
    str | None,
    typer.Option(
        "--network",
        help=f"network mode: {', '.join(MODES)} (default none; --allow implies allow)",
        show_default=False,
    ),
]
AllowOption = Annotated[
    list[str] | None,
    typer.Option("--allow", help=f"allow rule (repeat): {RULE_DESCRIPTION}", show_default=False),
]
DenyOption = Annotated[
    list[str] | None,
    typer.Option("--deny", help="deny rule (repeat); a deny rule wins", show_default=False),
]


@app.callback()
def _connection(
    ctx: typer.Context,
    target: Annotated[
        str, typer.Option(envvar="SANDBOXD_TARGET", help="sandboxd gRPC target")
    ] = DEFAULT_TARGET,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SANDBOXD_TOKEN", help="bearer token (TCP targets)", show_default=False
        ),
    ] = None,
) -> None:
    ctx.obj = Connection(target, token)


def _conn(ctx: typer.Context) -> Connection:
    assert isinstance(ctx.obj, Connection)
    return ctx.obj


app.add_typer(snapshots.app, name="snapshot")
app.add_typer(templates.app, name="template")

# ------------------------------------------------------------------ instances


@app.command()
def create(
    ctx: typer.Context,
    instance_id: InstanceId,
    image: Annotated[str, typer.Option(help="workspace image (default: the daemon's)")] = "",
    network: NetworkModeOption = None,
    allow: AllowOption = None,
    deny: DenyOption = None,
    workdir: Annotated[str, typer.Option(help="working folder (default /workspace)")] = "",
    idle_ttl: Annotated[int, typer.Option(help="stop the container after N idle seconds")] = 0,
    secret: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME@HOST[,HOST...][=PATH]: the value of this shell's $NAME, sent only in "
            "request headers to those hosts; the sandbox sees a placeholder in $NAME "
            "(or in the file PATH). Repeatable."
        ),
    ] = None,
    max_lifetime: Annotated[
        int, typer.Option(help="delete the sandbox N seconds after its create")
    ] = 0,
    from_snapshot: Annotated[
        str, typer.Option(help="a new sandbox with this snapshot's files and options")
    ] = "",
    as_json: JsonFlag = False,
) -> None:
    """Create an instance's workspace (or find the existing one: create is idempotent)."""
    options = SandboxOptions(
        image=image,
        network=from_flags(network, allow, deny),
        workdir=workdir,
        idle_ttl_seconds=idle_ttl,
        secrets=tuple(_secret(spec) for spec in secret or ()),
        max_lifetime_seconds=max_lifetime,
    )
    if from_snapshot:

        async def restored(factory: GrpcSandboxFactory) -> Any:
            with err.status(f"creating {instance_id} from {from_snapshot} ..."):
                return await factory.transport.create_from_snapshot(
                    from_snapshot, instance_id, options
                )

        result = run(_conn(ctx), restored)
        if as_json:
            typer.echo(json.dumps(snapshots.copied_json(result), indent=2))
        else:
            out.print(
                f"created {instance_id} from snapshot {from_snapshot} "
                f"({result.method}, {result.duration_ms} ms)",
                highlight=False,
            )
        return

    async def action(factory: GrpcSandboxFactory) -> Any:
        # A Docker create may take seconds (no warm pool, a cold image).
        with err.status(f"creating {instance_id} ..."):
            return await factory.transport.create_sandbox(instance_id, options)

    info, created = run(_conn(ctx), action)
    if as_json:
        typer.echo(json.dumps({**render.info_json(info), "created": created}))
    else:
        verb = "created" if created else "exists"
        out.print(f"{verb} {info.instance_id} ({info.state})", highlight=False)
        _warn(info)


def _warn(info: SandboxInfo) -> None:
    for warning in info.warnings:
        err.print(f"warning: {warning}", highlight=False)


# ------------------------------------------------------------------ network


net = typer.Typer(help="A sandbox's network policy and egress decisions.", no_args_is_help=True)
app.add_typer(net, name="net")


@net.command("set")
def net_set(
    ctx: typer.Context,
    instance_id: InstanceId,
    network: NetworkModeOption = None,
    allow: AllowOption = None,
    deny: DenyOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Replace the sandbox's policy: `net set ID --allow pypi.org --allow
    files.pythonhosted.org`, `net set ID --network none`. Live connections
    the new policy forbids are closed."""
    policy = from_flags(network, allow, deny)
    if policy is None:
        fail("give --network MODE and/or --allow/--deny rules")

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.set_network_policy(instance_id, policy)

    info = run(_conn(ctx), action)
    if as_json:
        typer.echo(json.dumps(render.info_json(info)))
        return
    now = info.options.network or NetworkPolicy()
    out.print(f"{info.instance_id}: network {now.mode}", highlight=False)
    for field in ("allow", "deny"):
        for rule in getattr(now, field):
            out.print(f"  {field} {rule}", highlight=False)
    _warn(info)


@net.command("log")
def net_log(
    ctx: typer.Context,
    instance_id: InstanceId,
    limit: Annotated[int, typer.Option(help="the newest N decisions (0: all kept)")] = 0,
    as_json: JsonFlag = False,
) -> None:
    """The sandbox's recent egress decisions, oldest first: what was allowed,
    what was refused and by which rule."""

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.network_log(instance_id, limit)

    entries = run(_conn(ctx), action)
    if as_json:
        typer.echo(json.dumps([entry.to_json() for entry in entries]))
    elif not entries:
        err.print("no egress decisions kept")
    else:
        out.print(render.decisions_table(entries))


def _secret(spec: str) -> Secret:
    """``NAME@HOSTS[=PATH]``, the value from this process's environment (never argv:
    a value on the command line is in ``ps`` and shell history)."""
    name, at, rest = spec.partition("@")
    hosts, eq, path = rest.partition("=")
    if not at or not name or not hosts:
        raise typer.BadParameter(f"--secret {spec!r}: write NAME@HOST[,HOST...][=PATH]")
    value = os.environ.get(name)
    if not value:
        raise typer.BadParameter(f"--secret {name}: set ${name} in this shell to the value")
    return Secret(
        name=name,
        value=SecretValue(value),
        hosts=tuple(h for h in hosts.split(",") if h),
        env="" if eq else name,
        file=path,
    )


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List instances."""

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.list_sandboxes()

    infos = run(_conn(ctx), action)
    if as_json:
        typer.echo(json.dumps([render.info_json(info) for info in infos]))
    elif not infos:
        err.print("no instances")
    else:
        out.print(render.sandboxes_table(infos))


@app.command()
def info(ctx: typer.Context, instance_id: InstanceId) -> None:
    """Show one instance as JSON."""

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.get_sandbox(instance_id)

    typer.echo(json.dumps(render.info_json(run(_conn(ctx), action)), indent=2))


@app.command()
def extend(
    ctx: typer.Context,
    instance_id: InstanceId,
    seconds: Annotated[int, typer.Argument(help="the sandbox ends this long from now")],
) -> None:
    """Let an instance live SECONDS from now (within the daemon's maximum lifetime)."""

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.extend_sandbox(instance_id, seconds)

    info = run(_conn(ctx), action)
    out.print(f"{instance_id} ends {render.when(info.expires_at_ms)}", highlight=False)


@app.command()
def delete(
    ctx: typer.Context,
    instance_ids: Annotated[list[str], typer.Argument(help="instance ids")],
) -> None:
    """Delete instances: container and files, for good."""

    async def action(factory: GrpcSandboxFactory) -> None:
        for instance_id in instance_ids:
            with err.status(f"deleting {instance_id} ..."):
                await factory.transport.delete_sandbox(instance_id)
            out.print(f"deleted {instance_id}", highlight=False)

    run(_conn(ctx), action)


# ------------------------------------------------------------------ ports


def _port_spec(spec: str) -> tuple[int, int]:
    """``[LOCAL:]REMOTE`` as kubectl takes it; LOCAL empty or 0: any free port."""
    local, _, remote = spec.rpartition(":")
    try:
        ports = (int(local) if local else 0, int(remote))
    except ValueError:
        fail(f"port must be [LOCAL:]REMOTE, e.g. 8080:80 or 3000 (got {spec!r})", 2)
    if not (0 <= ports[0] <= 65535 and 0 < ports[1] <= 65535):
        fail(f"ports must be from 1 to 65535 (got {spec!r})", 2)
    return ports


@app.command("port-forward")
def port_forward(
    ctx: typer.Context,
    instance_id: InstanceId,
    spec: Annotated[str, typer.Argument(metavar="[LOCAL:]REMOTE", help="e.g. 8080:80, :3000")],
    address: Annotated[str, typer.Option(help="local address to listen on")] = "127.0.0.1",
    remote_host: Annotated[
        str, typer.Option(help="inside: 127.0.0.1, ::1, or localhost (both, 127.0.0.1 first)")
    ] = "localhost",
) -> None:
    """Forward a local port to a port inside the sandbox, until ^C (network off is fine)."""
    local_port, remote_port = _port_spec(spec)

    async def action(factory: GrpcSandboxFactory) -> None:
        await factory.transport.get_sandbox(instance_id)  # a typo fails now, not per connection
        box = Sandbox(factory.transport, instance_id)
        forward = box.forward_port(
            remote_port, local_port=local_port, local_host=address, remote_host=remote_host
        )
        async with forward:
            err.print(
                f"Forwarding from {address}:{forward.port} -> {instance_id}:{remote_port}",
                highlight=False,
            )
            await forward.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        run(_conn(ctx), action)


@app.command()
def ports(ctx: typer.Context, instance_id: InstanceId, as_json: JsonFlag = False) -> None:
    """List the TCP ports something listens on inside the sandbox."""

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.list_ports(instance_id)

    found = run(_conn(ctx), action)
    if as_json:
        typer.echo(json.dumps([{"host": p.host, "port": p.port} for p in found]))
    else:
        for item in found:
            out.print(
                f"{item.host}:{item.port}"
                if ":" not in item.host
                else f"[{item.host}]:{item.port}",
                highlight=False,
            )


# ------------------------------------------------------------------ the tools


def _tool(
    ctx: typer.Context, instance_id: str, name: str, arguments: Mapping[str, Any], as_json: bool
) -> None:
    async def action(factory: GrpcSandboxFactory) -> SandboxToolResult:
        return await Sandbox(factory.transport, instance_id).call_tool(name, arguments)

    result = run(_conn(ctx), action)
    if as_json:
        payload = {"text": result.text, "is_error": result.is_error, "fields": dict(result.fields)}
        typer.echo(json.dumps(payload))
    else:
        typer.echo(result.text)
    if result.is_error:
        raise typer.Exit(1)


def _given(**arguments: Any) -> dict[str, Any]:
    # Unset options are left out, so the tool's own defaults apply.
    return {k: v for k, v in arguments.items() if v is not None and v is not False}


@app.command()
def read(
    ctx: typer.Context,
    instance_id: InstanceId,
    file_path: Annotated[str, typer.Argument(help="file, relative to the working folder")],
    offset: Annotated[int | None, typer.Option(help="1-based first line")] = None,
    limit: Annotated[int | None, typer.Option(help="number of lines")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the read tool (cat -n style, paged)."""
    _tool(
        ctx, instance_id, "read", _given(file_path=file_path, offset=offset, limit=limit), as_json
    )


@app.command()
def write(
    ctx: typer.Context,
    instance_id: InstanceId,
    file_path: Annotated[str, typer.Argument(help="file, relative to the working folder")],
    content: Annotated[
        str | None, typer.Argument(help="the content; omit or '-' for stdin")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the write tool (atomic; overwriting needs a read first)."""
    text = sys.stdin.read() if content in (None, "-") else content
    _tool(ctx, instance_id, "write", {"file_path": file_path, "content": text}, as_json)


@app.command()
def edit(
    ctx: typer.Context,
    instance_id: InstanceId,
    file_path: Annotated[str, typer.Argument()],
    old_string: Annotated[str, typer.Argument(help="exact text to replace")],
    new_string: Annotated[str, typer.Argument(help="replacement")],
    replace_all: Annotated[bool, typer.Option("--replace-all")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the edit tool (unique match unless --replace-all)."""
    arguments = _given(
        file_path=file_path, old_string=old_string, new_string=new_string, replace_all=replace_all
    )
    _tool(ctx, instance_id, "edit", arguments, as_json)


@app.command()
def bash(
    ctx: typer.Context,
    instance_id: InstanceId,
    command: Annotated[str, typer.Argument(help="run by bash -c; cd and export persist")],
    timeout: Annotated[
        int | None, typer.Option(help=f"milliseconds ({BASH_MIN_TIMEOUT_MS}-{BASH_MAX_TIMEOUT_MS})")
    ] = None,
    workdir: Annotated[str | None, typer.Option(help="run in this folder")] = None,
    background: Annotated[bool, typer.Option("--background", help="return a job id")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the bash tool (output merged and capped; see `exec` for raw streams)."""
    arguments = _given(
        command=command, timeout=timeout, workdir=workdir, run_in_background=background
    )
    _tool(ctx, instance_id, "bash", arguments, as_json)


@app.command()
def grep(
    ctx: typer.Context,
    instance_id: InstanceId,
    pattern: Annotated[str, typer.Argument(help="regular expression (ripgrep syntax)")],
    path: Annotated[str | None, typer.Option(help="file or folder to search")] = None,
    glob: Annotated[str | None, typer.Option(help="only files matching, e.g. '*.py'")] = None,
    output_mode: Annotated[
        str | None, typer.Option("--output-mode", "-o", help="files_with_matches|content|count")
    ] = None,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i")] = False,
    context: Annotated[int | None, typer.Option("--context", "-C")] = None,
    head_limit: Annotated[int | None, typer.Option(help="at most N entries")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the grep tool."""
    arguments = _given(
        pattern=pattern, path=path, glob=glob, output_mode=output_mode, head_limit=head_limit
    )
    arguments.update(_given(**{"-i": ignore_case, "-C": context}))
    _tool(ctx, instance_id, "grep", arguments, as_json)


@app.command("glob")
def glob_(
    ctx: typer.Context,
    instance_id: InstanceId,
    pattern: Annotated[str, typer.Argument(help="e.g. '**/*.py'")],
    path: Annotated[str | None, typer.Option(help="folder to search")] = None,
    head_limit: Annotated[int | None, typer.Option(help="at most N files")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the glob tool (newest first)."""
    _tool(
        ctx, instance_id, "glob", _given(pattern=pattern, path=path, head_limit=head_limit), as_json
    )


@app.command()
def call(
    ctx: typer.Context,
    instance_id: InstanceId,
    name: Annotated[str, typer.Argument(help="read, write, edit, bash, grep or glob")],
    arguments: Annotated[str, typer.Argument(help="the arguments as JSON, as a model sends them")],
    as_json: JsonFlag = False,
) -> None:
    """Run any tool with raw JSON arguments (aliases and unknown keys judged by sandboxd)."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        fail(f"arguments are not JSON: {exc}", code=2)
    if not isinstance(parsed, dict):
        fail("arguments must be a JSON object", code=2)
    _tool(ctx, instance_id, name, parsed, as_json)


# ------------------------------------------------------------------ exec


def _exit_status(exit_code: int, timed_out: bool) -> int:
    if timed_out:
        return 124  # as coreutils `timeout` says it
    if exit_code < 0:
        return 128 - exit_code  # killed by signal N: the shell's 128+N
    return min(exit_code, 255)


@app.command("exec")
def exec_(
    ctx: typer.Context,
    instance_id: InstanceId,
    command: Annotated[list[str], typer.Argument(help="argv after --, e.g. -- ls -la")],
    shell: Annotated[
        bool, typer.Option("--shell", "-s", help="join the words, run by bash -c")
    ] = False,
    cwd: Annotated[str, typer.Option(help="working folder")] = "",
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE, repeatable")
    ] = None,
    timeout_ms: Annotated[int, typer.Option(help="0: the daemon's default")] = 0,
) -> None:
    """Run a command, streaming its stdout and stderr as produced; exit with its status."""
    variables = dict(item.split("=", 1) for item in env or () if "=" in item)
    argv: str | list[str] = " ".join(command) if shell else list(command)

    async def action(factory: GrpcSandboxFactory) -> int:
        sandbox = Sandbox(factory.transport, instance_id)
        status = 0
        events = sandbox.exec_stream(argv, cwd=cwd, env=variables, timeout_ms=timeout_ms)
        async for event in events:
            if isinstance(event, ExecOutput):
                stream = sys.stdout if event.stream == "stdout" else sys.stderr
                stream.buffer.write(event.data)
                stream.flush()
            elif isinstance(event, ExecExit):
                status = _exit_status(event.exit_code, event.timed_out)
                if event.timed_out:
                    err.print(f"sandboxctl: timed out after {event.duration_ms} ms")
        return status

    raise typer.Exit(run(_conn(ctx), action))


@app.command()
def shell(
    ctx: typer.Context,
    instance_id: InstanceId,
    command: Annotated[
        list[str] | None, typer.Argument(help="program and arguments after -- (default: bash)")
    ] = None,
    cwd: Annotated[str, typer.Option(help="working folder")] = "",
) -> None:
    """An interactive terminal in the workspace (like docker exec -it); exits with its status."""

    async def action(factory: GrpcSandboxFactory) -> int:
        sandbox = Sandbox(factory.transport, instance_id)
        return await interactive(
            sandbox,
            list(command or ["bash"]),
            stdin_fd=sys.stdin.fileno(),
            stdout=sys.stdout.buffer,
            cwd=cwd,
        )

    raise typer.Exit(run(_conn(ctx), action))


# ------------------------------------------------------------------ status


def _health_of(connection: Connection) -> dict[str, str]:
    async def both() -> dict[str, str]:
        server, service = await asyncio.gather(
            health(connection), health(connection, "sandboxd.v1.SandboxService")
        )
        return {"": server, "sandboxd.v1.SandboxService": service}

    return asyncio.run(both())


@app.command()
def status(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show the daemon: version, backend, warm pool, and gRPC health."""
    connection = _conn(ctx)
    states = _health_of(connection)
    if states[""] != "SERVING":
        fail(f"{connection.target}: {states['']}", code=1)

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.get_status()

    server_status = run(connection, action)
    if as_json:
        typer.echo(json.dumps(render.status_json(server_status, states)))
    else:
        out.print(render.status_table(server_status, states, connection.target))


@app.command("health")
def health_(ctx: typer.Context) -> None:
    """Exit 0 when sandboxd answers SERVING (for container health checks)."""
    connection = _conn(ctx)
    state = asyncio.run(health(connection))
    typer.echo(state)
    if state != "SERVING":
        raise typer.Exit(1)


# ------------------------------------------------------------------ moving files


def _remote(spec: str) -> tuple[str, str] | None:
    """``ID:path`` -> (ID, path); None for a local path (an existing local path wins)."""
    instance, sep, path = spec.partition(":")
    if not sep or not instance or "/" in instance or os.path.exists(spec):
        return None
    return instance, path or "."


@contextlib.contextmanager
def _progress(label: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr for transfers worth watching (a terminal, and
    1 MiB or more, or of unknown size)."""
    if not err.is_terminal or (total is not None and total < (1 << 20)):
        yield lambda _n: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def _tree_size(folder: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


@app.command()
def cp(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="local path, or ID:path in a sandbox")],
    dest: Annotated[str, typer.Argument(help="local path, or ID:path in a sandbox")],
    gitignore: Annotated[
        bool, typer.Option(help="downloading a folder: leave out what .gitignore ignores")
    ] = False,
) -> None:
    """Copy a file or a folder into or out of a sandbox, like docker cp / kubectl cp.

    A folder's contents land in the destination folder (created); any size,
    streamed in chunks. Exactly one side is ``ID:path``.
    """
    remote_source, remote_dest = _remote(source), _remote(dest)
    if (remote_source is None) == (remote_dest is None):
        fail("give exactly one sandbox side, as ID:path (e.g. agent-1:/workspace/out)", 2)
    # Local facts first: the async part below only moves bytes.
    source_is_dir = remote_source is None and os.path.isdir(source)
    if remote_source is None and not source_is_dir and not os.path.isfile(source):
        fail(f"{source}: no such local file or folder", 2)
    source_size = (
        (_tree_size(source) if source_is_dir else os.path.getsize(source))
        if remote_source is None
        else 0
    )
    dest_is_dir = os.path.isdir(dest)

    async def upload(factory: GrpcSandboxFactory, instance: str, path: str) -> str:
        sandbox = Sandbox(factory.transport, instance)
        if source_is_dir:
            with _progress(f"{source} -> {dest}", source_size) as step:
                tree = await sandbox.upload_tree(source, path, progress=step)
            return (
                f"{tree.files} files, {tree.symlinks} links, {tree.bytes} bytes -> {dest}"
                + _left_out(tree.links_skipped, tree.skipped_links)
            )
        with _progress(f"{source} -> {dest}", source_size) as step:
            done = await sandbox.upload(path, source, progress=step)
        return f"{done.size} bytes -> {dest} (sha256 {done.sha256})"

    async def download(factory: GrpcSandboxFactory, instance: str, path: str) -> str:
        sandbox = Sandbox(factory.transport, instance)
        info = await sandbox.stat(path, follow_symlinks=True)
        if info.type.value == "directory":
            with _progress(f"{source} -> {dest}", None) as step:
                tree = await sandbox.download_tree(path, dest, gitignore=gitignore, progress=step)
            return f"{tree.entries} entries, {tree.bytes} bytes -> {dest}" + _left_out(
                tree.links_skipped, tree.skipped_links
            )
        target = dest
        if dest_is_dir:
            target = os.path.join(dest, os.path.basename(path.rstrip("/")))
        with _progress(f"{source} -> {target}", info.size) as step:
            done = await sandbox.download(path, target, progress=step)
        return f"{done.size} bytes -> {target} (sha256 {done.sha256})"

    async def action(factory: GrpcSandboxFactory) -> str:
        if remote_dest is not None:
            return await upload(factory, *remote_dest)
        assert remote_source is not None
        return await download(factory, *remote_source)

    err.print(run(_conn(ctx), action), highlight=False)


@app.command()
def fork(
    ctx: typer.Context,
    source_id: InstanceId,
    new_id: Annotated[str, typer.Argument(help="the fork's instance id")],
    as_json: JsonFlag = False,
) -> None:
    """Fork an instance: a new one whose files start as a copy of the source's."""

    async def action(factory: GrpcSandboxFactory) -> Any:
        return await factory.transport.fork_sandbox(source_id, new_id)

    result = run(_conn(ctx), action)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "sandbox": render.info_json(result.sandbox),
                    "method": result.method,
                    "duration_ms": result.duration_ms,
                },
                indent=2,
            )
        )
    else:
        out.print(
            f"forked {source_id} -> {new_id} ({result.method}, {result.duration_ms} ms)",
            highlight=False,
        )


def main() -> None:
    app()


def _left_out(count: int, links: Sequence[SkippedLink], shown: int = 5) -> str:
    """The symlinks a tree copy left out (they would resolve outside its target)."""
    if not count:
        return ""
    lines = [f"{link.path} -> {link.target} ({link.reason})" for link in links[:shown]]
    more = f"\n  ... and {count - len(lines)} more" if count > len(lines) else ""
    return f"\n{count} symlink(s) left out:\n  " + "\n  ".join(lines) + more

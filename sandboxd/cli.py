"""``sandboxd`` command line: ``sandboxd serve`` and ``sandboxd mcp``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from typing import Any

from sandboxd import __version__
from sandboxd.contract.errors import SandboxdError
from sandboxd.contract.extras import MissingExtra, require
from sandboxd.contract.network import MODES, RULE_DESCRIPTION, from_flags


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # Server extra (prometheus_client): only `serve` logs through this formatter.
        from sandboxd.observability.calls import log_fields

        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(log_fields(record))  # instance id, tool call id, access-log fields
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sandboxd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"sandboxd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve", help="serve the gRPC API (flags override SANDBOXD_* variables)"
    )
    _add_mcp_parser(commands)
    # `sandboxd mcp` and `--help` work without the server extra; `serve` then says it is missing.
    try:
        from sandboxd.daemon.settings import Settings
    except ImportError:
        return parser
    for name, field in Settings.model_fields.items():
        serve.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=None, help=field.description
        )
    return parser


def _add_mcp_parser(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp", help="serve one instance's six tools over MCP (a client of a running sandboxd)"
    )
    mcp.add_argument(
        "--target",
        default=os.environ.get("SANDBOXD_TARGET", "unix:///run/sandboxd/sandboxd.sock"),
        help="sandboxd gRPC target (env SANDBOXD_TARGET)",
    )
    mcp.add_argument(
        "--token", default=os.environ.get("SANDBOXD_TOKEN"), help="bearer token for TCP targets"
    )
    mcp.add_argument(
        "--instance",
        required=True,
        help="instance id whose workspace the tools use (created if missing)",
    )
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP transport: address to bind")
    mcp.add_argument("--port", type=int, default=8765, help="HTTP transport: port (path /mcp)")
    mcp.add_argument(
        "--network",
        choices=MODES,
        help="network mode of the sandbox the bridge creates (default none; --allow: allow)",
    )
    mcp.add_argument("--allow", action="append", default=[], help=f"allow rule: {RULE_DESCRIPTION}")
    mcp.add_argument("--deny", action="append", default=[], help="deny rule (wins over allow)")


def _mcp(args: argparse.Namespace) -> int:
    # stdout is the protocol channel under stdio: logs go to stderr only.
    logging.basicConfig(level="WARNING", stream=sys.stderr)
    try:
        require("mcp", "sandboxd mcp")
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        return 2
    # The mcp extra, checked just above.
    from sandboxd.mcp.bridge import run_bridge

    try:
        asyncio.run(
            run_bridge(
                args.target,
                args.instance,
                token=args.token,
                transport=args.transport,
                host=args.host,
                port=args.port,
                network=from_flags(args.network, args.allow, args.deny),
            )
        )
    except SandboxdError as exc:
        print(f"sandboxd mcp: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


TOKEN_WARNING = (
    "sandboxd: warning: --token on the command line is visible to every user of this "
    "host (ps, /proc/<pid>/cmdline); prefer SANDBOXD_TOKEN or SANDBOXD_TOKENS_FILE"
)


def _warn_token_on_command_line(argv: list[str]) -> None:
    if any(a == "--token" or a.startswith("--token=") for a in argv):
        print(TOKEN_WARNING, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _warn_token_on_command_line(sys.argv[1:] if argv is None else argv)
    if args.command == "mcp":
        return _mcp(args)
    try:
        require("server", "sandboxd serve")
        if (getattr(args, "backend", None) or os.environ.get("SANDBOXD_BACKEND")) == "kubernetes":
            require("kubernetes", "sandboxd serve --backend kubernetes")
    except MissingExtra as exc:
        print(exc, file=sys.stderr)
        return 2
    # The server extra, checked just above.
    from pydantic import ValidationError

    from sandboxd.daemon.settings import Settings

    overrides = {k: v for k, v in vars(args).items() if k != "command" and v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        print(f"sandboxd: invalid configuration:\n{exc}", file=sys.stderr)
        return 2
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonFormatter())
    logging.basicConfig(level=settings.log_level.upper(), handlers=[handler])
    from sandboxd.daemon.assembly import Daemon  # the server extra, as above

    async def serve() -> None:
        # grpc.aio binds its server to the loop it is created on.
        await Daemon(settings).serve_until_signalled()

    try:
        asyncio.run(serve())
    except SandboxdError as exc:
        print(f"sandboxd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

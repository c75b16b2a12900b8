"""``sandboxd`` command line: ``sandboxd serve``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from typing import Any

from pydantic import ValidationError

from sandboxd import __version__
from sandboxd.config import Settings
from sandboxd.errors import SandboxdError


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
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
    for name, field in Settings.model_fields.items():
        serve.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=None, help=field.description
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if k != "command" and v is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        print(f"sandboxd: invalid configuration:\n{exc}", file=sys.stderr)
        return 2
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonFormatter())
    logging.basicConfig(level=settings.log_level.upper(), handlers=[handler])
    from sandboxd.grpc.server import Server

    async def serve() -> None:
        # grpc.aio binds its server to the loop it is created on.
        await Server(settings).serve_until_signalled()

    try:
        asyncio.run(serve())
    except SandboxdError as exc:
        print(f"sandboxd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

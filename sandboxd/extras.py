"""The optional parts of the install, and the console-script launchers.

``pip install sandboxd`` is the client alone (grpcio + protobuf); everything
else is an extra of pyproject.toml. This module names, per extra, the modules
it brings, so a lazy import or an entry point can tell the user which extra is
missing instead of showing an ImportError traceback. Standard library only:
it runs before anything optional is known to be there.
"""

from __future__ import annotations

import importlib.util
import sys

# Extra -> the top-level modules it installs (tests/unit/test_extras.py checks
# these names against pyproject.toml's extras).
EXTRAS: dict[str, tuple[str, ...]] = {
    "agent": ("pydantic", "anyio"),
    "local": ("pydantic", "anyio", "pydantic_settings"),
    "server": (
        "docker",
        "grpc_health",
        "grpc_reflection",
        "pydantic",
        "pydantic_settings",
        "anyio",
        "fastapi",
        "uvicorn",
        "prometheus_client",
    ),
    "ctl": ("typer", "rich", "grpc_health"),
    "mcp": ("pydantic", "anyio", "mcp"),
    "openai": ("httpx",),
    "pytest": ("pydantic", "anyio", "pydantic_settings", "pytest"),
}


class MissingExtra(ImportError):
    """A feature was used whose extra is not installed."""


def missing(extra: str) -> list[str]:
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def message(extra: str, feature: str, absent: list[str] | None = None) -> str:
    absent = missing(extra) if absent is None else absent
    return f"{feature} needs the '{extra}' extra: pip install 'sandboxd[{extra}]'" + (
        f" (missing: {', '.join(absent)})" if absent else ""
    )


def require(extra: str, feature: str) -> None:
    """Raise ``MissingExtra`` naming ``extra`` unless all of its modules are installed."""
    absent = missing(extra)
    if absent:
        raise MissingExtra(message(extra, feature, absent), name=absent[0])


def _launch_check(extra: str, feature: str) -> None:
    absent = missing(extra)
    if absent:
        print(message(extra, feature, absent), file=sys.stderr)
        sys.exit(2)


def sandboxd_main() -> None:
    """``sandboxd``: ``sandboxd mcp`` needs the mcp extra, anything else the server extra."""
    args = sys.argv[1:]
    if args[:1] == ["mcp"]:
        _launch_check("mcp", "sandboxd mcp")
    elif args[:1] not in (["--version"], ["-h"], ["--help"], []):
        _launch_check("server", "sandboxd serve")
    from sandboxd.cli import main

    sys.exit(main())


def sandboxctl_main() -> None:
    """``sandboxctl``: the command line client needs the ctl extra."""
    _launch_check("ctl", "sandboxctl")
    from sandboxd.ctl.app import main

    main()

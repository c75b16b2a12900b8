"""The optional parts of the install: which modules each extra brings.

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
        "wsproto",
        "prometheus_client",
        "cryptography",
    ),
    "kubernetes": (
        "docker",
        "grpc_health",
        "grpc_reflection",
        "pydantic",
        "pydantic_settings",
        "anyio",
        "fastapi",
        "uvicorn",
        "wsproto",
        "prometheus_client",
        "cryptography",
        "aiohttp",
        "yaml",
    ),
    "ctl": ("typer", "rich", "grpc_health"),
    "mcp": ("pydantic", "anyio", "mcp"),
    "openai": ("httpx",),
    "pytest": ("pydantic", "anyio", "pydantic_settings", "pytest"),
    "pydantic-ai": ("pydantic_ai",),
    "inspect-ai": ("inspect_ai",),
    "openai-agents": ("agents",),
    "deepagents": ("deepagents",),
}
#: The agent frameworks' extras (runtime_client.contrib): not in `dev`, whose
#: virtualenv they would crowd, but in the frameworks tier's (`make frameworks-test`).
FRAMEWORK_EXTRAS = frozenset({"pydantic-ai", "inspect-ai", "openai-agents", "deepagents"})


#: The oldest Python the daemon (the server extra) runs on. The client and the
#: other extras run on 3.10 too (pyproject.toml's requires-python); the daemon
#: uses what 3.11 brought (asyncio.timeout and its cheaper cancellation).
SERVER_PYTHON = (3, 11)


class MissingExtra(ImportError):
    """A feature was used whose extra is not installed."""


def python_problem(extra: str, feature: str) -> str | None:
    """Why this interpreter cannot run ``extra``'s feature at all, or None."""
    if extra != "server" or sys.version_info >= SERVER_PYTHON:
        return None
    needed = ".".join(map(str, SERVER_PYTHON))
    this = ".".join(map(str, sys.version_info[:3]))
    return (
        f"{feature} needs Python {needed} or newer (this is Python {this}); "
        "the client (pip install sandboxd, with the agent, pytest, mcp and ctl extras) "
        "works on this Python"
    )


def missing(extra: str) -> list[str]:
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def message(extra: str, feature: str, absent: list[str] | None = None) -> str:
    absent = missing(extra) if absent is None else absent
    return f"{feature} needs the '{extra}' extra: pip install 'sandboxd[{extra}]'" + (
        f" (missing: {', '.join(absent)})" if absent else ""
    )


def require(extra: str, feature: str) -> None:
    """Raise ``MissingExtra`` naming ``extra`` unless all of its modules are
    installed (or naming the Python it needs when this one is too old)."""
    problem = python_problem(extra, feature)
    if problem:
        raise MissingExtra(problem)
    absent = missing(extra)
    if absent:
        raise MissingExtra(message(extra, feature, absent), name=absent[0])

"""Errors every backend raises in the same words."""

from __future__ import annotations

from sandboxd.contract.errors import InvalidArgument, NotFound


def unknown_instance(instance: str) -> NotFound:
    return NotFound(f"no sandbox with instance id {instance!r}; create it with CreateSandbox")


def unsupported(feature: str, backend: str, instead: str) -> InvalidArgument:
    """A feature this engine does not have, said plainly (README's backend table)."""
    return InvalidArgument(f"{feature} are not supported on the {backend} backend; {instead}")

"""Errors every backend raises in the same words."""

from __future__ import annotations

from sandboxd.contract.errors import NotFound


def unknown_instance(instance: str) -> NotFound:
    return NotFound(f"no sandbox with instance id {instance!r}; create it with CreateSandbox")

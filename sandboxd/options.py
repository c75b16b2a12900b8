"""Sandbox options: validation, daemon defaults, and the idempotency check."""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Any

from sandboxd import validation
from sandboxd.config import Settings
from sandboxd.errors import AlreadyExists, InvalidArgument
from sandboxd.models import Runtime, SandboxOptions

DEFAULT_WORKDIR = "/workspace"
_MiB = 1 << 20


def effective(requested: SandboxOptions, settings: Settings) -> SandboxOptions:
    """Validate ``requested`` and fill every unset field from the daemon's defaults."""
    validation.env(requested.env)
    validation.labels(requested.labels)
    if requested.memory_bytes < 0 or 0 < requested.memory_bytes < 16 * _MiB:
        raise InvalidArgument(
            f"memory_bytes must be at least {16 * _MiB} (16 MiB), got {requested.memory_bytes}"
        )
    if requested.cpus < 0:
        raise InvalidArgument(f"cpus must not be negative (got {requested.cpus})")
    if requested.pids_limit < 0 or 0 < requested.pids_limit < 16:
        raise InvalidArgument(f"pids_limit must be at least 16, got {requested.pids_limit}")
    if requested.idle_ttl_seconds < 0:
        raise InvalidArgument(
            f"idle_ttl_seconds must not be negative (got {requested.idle_ttl_seconds})"
        )
    workdir = requested.workdir or DEFAULT_WORKDIR
    normal = posixpath.normpath(workdir)
    if "\x00" in workdir or not (
        normal == DEFAULT_WORKDIR or normal.startswith(DEFAULT_WORKDIR + "/")
    ):
        raise InvalidArgument(
            f"workdir must be {DEFAULT_WORKDIR} or a folder inside it (got {workdir!r})"
        )
    if requested.image and ("\x00" in requested.image or len(requested.image) > 512):
        raise InvalidArgument("image must be a Docker image reference")
    return dataclasses.replace(
        requested,
        image=requested.image or settings.image,
        workdir=normal,
        memory_bytes=requested.memory_bytes or settings.memory_bytes,
        cpus=requested.cpus or settings.cpus,
        pids_limit=requested.pids_limit or settings.pids_limit,
        runtime=requested.runtime or Runtime.RUNC,
        network=bool(requested.network),
        disable_read_guard=bool(requested.disable_read_guard),
        idle_ttl_seconds=requested.idle_ttl_seconds or settings.idle_ttl_seconds,
    )


def check_same(instance_id: str, requested: SandboxOptions, existing: SandboxOptions) -> None:
    """Raise AlreadyExists when an explicitly requested option differs from the existing one.

    Only fields the caller set are compared, so "create with defaults" stays
    idempotent even if the daemon's defaults change between restarts.
    """
    differing = []
    for field in dataclasses.fields(SandboxOptions):
        wanted = getattr(requested, field.name)
        # Flags are tri-state (None: unset), so an explicit False is compared.
        unset = wanted is None or (
            not isinstance(wanted, bool) and (wanted in ("", 0, 0.0) or not wanted)
        )
        if field.name == "workdir" and wanted:
            wanted = posixpath.normpath(wanted)
        if not unset and wanted != getattr(existing, field.name):
            differing.append(field.name)
    if differing:
        raise AlreadyExists(
            f"sandbox {instance_id!r} already exists with different {', '.join(differing)}; "
            "delete it first or create it with the same options"
        )


def overridden(source: SandboxOptions, override: SandboxOptions) -> SandboxOptions:
    """``source`` with every field ``override`` sets (non-zero, non-empty) replacing it."""
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(SandboxOptions):
        value = getattr(override, field.name)
        if value is None or (not isinstance(value, bool) and not value):
            continue
        changes[field.name] = value
    return dataclasses.replace(source, **changes)

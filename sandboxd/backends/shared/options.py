"""Sandbox options: validation, daemon defaults, and the idempotency check.

Shared by the service (every create) and the engines (the warm pool's
options, a fork's source options with the caller's override).
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
from typing import Any

from sandboxd.backends.shared import bounds
from sandboxd.backends.shared.settings import MIN_DISK_BYTES, WorkspaceSettings
from sandboxd.contract import network, validation
from sandboxd.contract.errors import AlreadyExists, InvalidArgument
from sandboxd.contract.models import NetworkPolicy, Runtime, SandboxOptions

DEFAULT_WORKDIR = "/workspace"
#: Label keys only the daemon writes (the tenant's, ``service/scope.py``).
RESERVED_LABEL_PREFIX = "sandboxd."
_MiB = 1 << 20


def effective(requested: SandboxOptions, settings: WorkspaceSettings) -> SandboxOptions:
    """Validate ``requested`` and fill every unset field from the daemon's defaults."""
    validation.env(requested.env)
    validation.labels(requested.labels)
    if requested.memory_bytes < 0 or 0 < requested.memory_bytes < 16 * _MiB:
        raise InvalidArgument(
            f"memory_bytes must be at least {16 * _MiB} (16 MiB), got {requested.memory_bytes}"
        )
    if not math.isfinite(requested.cpus) or requested.cpus < 0:
        raise InvalidArgument(f"cpus must be a finite number, not negative (got {requested.cpus})")
    if requested.disk_bytes < 0 or 0 < requested.disk_bytes < MIN_DISK_BYTES:
        raise InvalidArgument(
            f"disk_bytes must be at least {MIN_DISK_BYTES} (16 MiB), got {requested.disk_bytes}"
        )
    if requested.pids_limit < 0 or 0 < requested.pids_limit < 16:
        raise InvalidArgument(f"pids_limit must be at least 16, got {requested.pids_limit}")
    for name in ("idle_ttl_seconds", "max_lifetime_seconds", "delete_after_stopped_seconds"):
        if getattr(requested, name) < 0:
            raise InvalidArgument(f"{name} must not be negative (got {getattr(requested, name)})")
    workdir = requested.workdir or DEFAULT_WORKDIR
    normal = posixpath.normpath(workdir)
    if "\x00" in workdir or not (
        normal == DEFAULT_WORKDIR or normal.startswith(DEFAULT_WORKDIR + "/")
    ):
        raise InvalidArgument(
            f"workdir must be {DEFAULT_WORKDIR} or a folder inside it (got {workdir!r})"
        )
    if requested.image:
        validation.image_reference(requested.image)
    if requested.network is not None:
        network.check(requested.network)
    for bound in bounds.OPTION_BOUNDS:
        bounds.check(bound, getattr(requested, bound.field), settings)
    return dataclasses.replace(
        requested,
        image=requested.image or settings.image,
        workdir=normal,
        memory_bytes=requested.memory_bytes or settings.memory_bytes,
        cpus=requested.cpus or settings.cpus,
        pids_limit=requested.pids_limit or settings.pids_limit,
        runtime=requested.runtime or Runtime.RUNC,
        network=requested.network or NetworkPolicy(),
        disable_read_guard=bool(requested.disable_read_guard),
        allow_ptrace=bool(requested.allow_ptrace),
        idle_ttl_seconds=requested.idle_ttl_seconds or settings.idle_ttl_seconds,
        max_lifetime_seconds=requested.max_lifetime_seconds or settings.max_lifetime_seconds,
        delete_after_stopped_seconds=(
            requested.delete_after_stopped_seconds or settings.delete_after_stopped_seconds
        ),
        # The container engines' default (ContainerSettings); the local backend has no disks.
        disk_bytes=requested.disk_bytes or getattr(settings, "disk_bytes", 0),
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
        have = getattr(existing, field.name)
        if field.name == "labels":
            # The daemon's own labels (a tenant's) are not the caller's to repeat.
            have = {k: v for k, v in have.items() if not k.startswith(RESERVED_LABEL_PREFIX)}
        if field.name == "secrets":
            # Values are write-only (never kept with the sandbox): names, hosts and
            # places are compared; a create with new values gives the daemon those.
            wanted = [secret.to_json() for secret in wanted]
            have = [secret.to_json() for secret in have]
        if not unset and wanted != have:
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

"""The names and labels sandboxd gives everything it creates in Docker.

An instance's identity is its container's name, ``sandboxd-<namespace>-<id>``:
names are unique per engine, so a create race has exactly one winner, and a
warm-pool container becomes an instance by being renamed (labels cannot be
changed after creation). Labels carry the rest: ownership, namespace, the
options, the volume, and the caller's own labels for filtering.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping

from sandboxd.models import SandboxOptions

MANAGED = "sandboxd.managed"
NAMESPACE = "sandboxd.namespace"
OPTIONS = "sandboxd.options"
VOLUME = "sandboxd.volume"
CREATED_AT = "sandboxd.created_at_ms"
POOLED = "sandboxd.pooled"
USER_PREFIX = "sandboxd.user."

# Instance ids start with a letter or digit, so no id can produce this infix.
_POOL_INFIX = "-pool-"


def resource_name(namespace: str, instance_id: str) -> str:
    """Name of an instance's container (and of its volume when created cold)."""
    return f"sandboxd-{namespace}-{instance_id}"


def pool_name(namespace: str) -> str:
    """A fresh name for a warm-pool container and its volume."""
    return f"sandboxd-{namespace}-{_POOL_INFIX}{secrets.token_hex(6)}"


def instance_from_name(namespace: str, name: str) -> str | None:
    """The instance id a container name stands for; None for pool and foreign names."""
    prefix = f"sandboxd-{namespace}-"
    name = name.lstrip("/")
    if not name.startswith(prefix) or name.startswith(prefix + _POOL_INFIX):
        return None
    return name[len(prefix) :] or None


def for_workspace(
    namespace: str, volume: str, options: SandboxOptions, created_at_ms: int, *, pooled: bool
) -> dict[str, str]:
    result = {
        MANAGED: "true",
        NAMESPACE: namespace,
        OPTIONS: json.dumps(options.to_json(), sort_keys=True),
        VOLUME: volume,
        CREATED_AT: str(created_at_ms),
    }
    if pooled:
        result[POOLED] = "true"
    result.update({USER_PREFIX + key: value for key, value in options.labels.items()})
    return result


def selector(namespace: str, user_labels: Mapping[str, str] | None = None) -> list[str]:
    """Docker ``label`` filters for this namespace (and user labels, all must match)."""
    filters = [f"{MANAGED}=true", f"{NAMESPACE}={namespace}"]
    filters += [f"{USER_PREFIX}{key}={value}" for key, value in (user_labels or {}).items()]
    return filters


def options_from(labels: Mapping[str, str]) -> SandboxOptions:
    try:
        return SandboxOptions.from_json(json.loads(labels.get(OPTIONS, "{}")))
    except (ValueError, TypeError):
        return SandboxOptions()

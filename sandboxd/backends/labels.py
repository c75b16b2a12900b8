"""The labels and names sandboxd puts on everything it creates in Docker."""

from __future__ import annotations

import json
from collections.abc import Mapping

from sandboxd.models import SandboxOptions

MANAGED = "sandboxd.managed"
NAMESPACE = "sandboxd.namespace"
INSTANCE = "sandboxd.instance"
OPTIONS = "sandboxd.options"
CREATED_AT = "sandboxd.created_at_ms"
USER_PREFIX = "sandboxd.user."


def resource_name(namespace: str, instance_id: str) -> str:
    """Container and volume name: unique per engine, so a create race has one winner."""
    return f"sandboxd-{namespace}-{instance_id}"


def for_instance(
    namespace: str, instance_id: str, options: SandboxOptions, created_at_ms: int
) -> dict[str, str]:
    labels = {
        MANAGED: "true",
        NAMESPACE: namespace,
        INSTANCE: instance_id,
        OPTIONS: json.dumps(options.to_json(), sort_keys=True),
        CREATED_AT: str(created_at_ms),
    }
    labels.update({USER_PREFIX + key: value for key, value in options.labels.items()})
    return labels


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

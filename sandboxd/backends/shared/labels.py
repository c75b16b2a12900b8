"""The names and labels sandboxd gives everything it creates in Docker.

An instance's identity is its container's name, ``sandboxd-<namespace>_<id>``:
names are unique per engine, so a create race has exactly one winner, and a
warm-pool container becomes an instance by being renamed (labels cannot be
changed after creation). Labels carry the rest: ownership, namespace, the
options, the volume, and the caller's own labels for filtering.

The ``_`` cannot occur in a namespace (``[a-z0-9][a-z0-9-]*``), so a name
stands for one (namespace, id) pair. The first naming joined them with ``-``,
which both may contain: namespace ``a`` with id ``b-c`` and namespace ``a-b``
with id ``c`` were the same container, volume and disk image, and a failed
create in one removed the other's (issue 23 item 4). Workspaces named that
way are renamed when their daemon starts (``legacy_instance_from_name``: a
container carries its creator's namespace label, which makes the old name
unambiguous to that daemon); their volumes keep their names.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping

from sandboxd.contract.models import SandboxOptions

MANAGED = "sandboxd.managed"
NAMESPACE = "sandboxd.namespace"
OPTIONS = "sandboxd.options"
VOLUME = "sandboxd.volume"
CREATED_AT = "sandboxd.created_at_ms"
POOLED = "sandboxd.pooled"
USER_PREFIX = "sandboxd.user."

# Instance ids start with a letter or digit, so no id can produce this infix.
_POOL_INFIX = "-pool-"
#: Between the namespace and the id: a character no namespace holds.
_SEPARATOR = "_"


def _prefix(namespace: str) -> str:
    return f"sandboxd-{namespace}{_SEPARATOR}"


def resource_name(namespace: str, instance_id: str) -> str:
    """Name of an instance's container (and of its volume when created cold)."""
    return f"{_prefix(namespace)}{instance_id}"


def pool_name(namespace: str) -> str:
    """A fresh name for a warm-pool container and its volume."""
    return f"{_prefix(namespace)}{_POOL_INFIX}{secrets.token_hex(6)}"


def instance_from_name(namespace: str, name: str) -> str | None:
    """The instance id a container name stands for; None for pool and foreign names."""
    return _id_after(_prefix(namespace), name)


def legacy_instance_from_name(namespace: str, name: str) -> str | None:
    """The instance id of a container named the first way (``sandboxd-<ns>-<id>``),
    for the daemon whose namespace label it carries; None for anything else."""
    return _id_after(f"sandboxd-{namespace}-", name)


def _id_after(prefix: str, name: str) -> str | None:
    name = name.lstrip("/")
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    # Pool names (an infix starting with "-") and the like are no instance.
    return rest if rest[:1].isalnum() else None


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

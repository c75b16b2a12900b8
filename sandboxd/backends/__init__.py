"""Workspace backends: one package per engine, a registry by name.

Each engine implements ``sandboxd.service.ports.WorkspaceBackend`` in its own
package (``docker/``, ``kubernetes/``, ``local/``) with a
settings class of its own; what several engines share (the executor channel,
the warm pool, labels, fork copies, option rules) is in ``shared/``. The
daemon picks one by ``SANDBOXD_BACKEND`` through ``backend_class``, which
imports only the chosen engine, so a local-backend daemon never loads
docker-py. Adding an engine: a package here, its name in ``BackendName`` and
``BACKENDS`` (tests/unit/test_architecture.py checks they agree).
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

#: The engines ``SANDBOXD_BACKEND`` may name.
BackendName = Literal["docker", "kubernetes", "local"]

#: Engine name -> "module:class" of its ``WorkspaceBackend``, imported on choice.
BACKENDS: dict[str, str] = {
    "docker": "sandboxd.backends.docker.backend:DockerBackend",
    "kubernetes": "sandboxd.backends.kubernetes.backend:KubernetesBackend",
    "local": "sandboxd.backends.local.backend:LocalBackend",
}


def backend_class(name: str) -> Any:
    """The backend class registered as ``name``, its module imported now."""
    try:
        target = BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"no workspace backend named {name!r}; have {', '.join(BACKENDS)}"
        ) from None
    module, _, attribute = target.partition(":")
    # Imported on choice: an engine's module needs that engine's client library.
    return getattr(importlib.import_module(module), attribute)

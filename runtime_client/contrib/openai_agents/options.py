"""``SandboxdSandboxClientOptions``: what a session asks of its sandboxd workspace.

Registered with openai-agents by its ``type`` (``"sandboxd"``), so it
round-trips through a serialized ``RunState``. The fields are sandboxd's
``SandboxOptions`` (zero / empty / None: the daemon's default), plus the
instance id and openai-agents' ``exposed_ports``.
"""

from __future__ import annotations

from typing import Literal

from agents.sandbox.session.sandbox_client import BaseSandboxClientOptions
from pydantic import Field

from sandboxd.contract.models import Runtime, SandboxOptions
from sandboxd.contract.network import coerce


class SandboxdSandboxClientOptions(BaseSandboxClientOptions):
    type: Literal["sandboxd"] = "sandboxd"
    #: The workspace's instance id; None makes one per session (the client's id prefix, a uuid).
    #: An id names one workspace: a session created with an existing id works in it.
    instance_id: str | None = None
    image: str = ""
    memory_bytes: int = 0
    cpus: float = 0.0
    pids_limit: int = 0
    #: None: the daemon's default (no network); True: the engine's bridge
    #: (mode ``full``), where allowed. An allow list: ``SandboxOptions.network``.
    network: bool | None = None
    runtime: Runtime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    idle_ttl_seconds: int = 0
    #: Ports inside the workspace that ``resolve_exposed_port`` may forward to this host.
    exposed_ports: tuple[int, ...] = ()

    def sandbox_options(self, *, env: dict[str, str], workdir: str) -> SandboxOptions:
        return SandboxOptions(
            image=self.image,
            env=env,
            workdir=workdir,
            memory_bytes=self.memory_bytes,
            cpus=self.cpus,
            pids_limit=self.pids_limit,
            network=coerce(self.network),
            runtime=self.runtime,
            labels=self.labels,
            idle_ttl_seconds=self.idle_ttl_seconds,
        )

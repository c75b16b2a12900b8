"""``SandboxdConfig``: which daemon an inspect task's sandboxes come from, and how they are made."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from runtime_client.contrib._common import HOST_MOUNT_REFUSED
from runtime_client.factories import DEFAULT_TARGET
from sandboxd.contract.models import SandboxOptions

_OPTION_FIELDS = frozenset(field.name for field in dataclasses.fields(SandboxOptions))


class SandboxdConfig(BaseModel):
    """``Task(sandbox=SandboxEnvironmentSpec("sandboxd-workspace", SandboxdConfig(...)))``.

    Inspect writes the configuration into its logs, so it holds the *name* of
    the variable with the daemon's token, never the token.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str = DEFAULT_TARGET
    """The daemon's gRPC target: ``unix:///run/sandboxd/sandboxd.sock`` or ``host:port``."""

    token_env: str | None = None
    """Environment variable holding the bearer token a TCP listener needs."""

    options: dict[str, Any] = Field(default_factory=dict)
    """``SandboxOptions`` of every sample's sandbox (image, memory_bytes, cpus,
    network, env, runtime, ...), as ``SandboxOptions.to_json`` writes them."""

    id_prefix: str = "inspect"
    """What sample sandboxes' instance ids start with (a scoped token's prefix)."""

    @field_validator("options")
    @classmethod
    def _known_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - _OPTION_FIELDS)
        if unknown:
            raise ValueError(
                f"unknown sandbox options {unknown}; known: {sorted(_OPTION_FIELDS)}"
                + (f". {HOST_MOUNT_REFUSED}" if {"volumes", "mounts"} & set(unknown) else "")
            )
        return value

    def __hash__(self) -> int:
        # Inspect keys its per-task caches by the config; options is a dict.
        return hash(self.model_dump_json())

    def sandbox_options(self) -> SandboxOptions:
        return SandboxOptions.from_json(self.options)

    def token(self) -> str | None:
        if self.token_env is None:
            return None
        token = os.environ.get(self.token_env)
        if not token:
            raise ValueError(f"SandboxdConfig.token_env names {self.token_env}, which is not set")
        return token

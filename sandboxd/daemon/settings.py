"""Configuration: ``SANDBOXD_*`` environment variables, overridden by flags.

``Settings`` is the daemon's own (listeners, tokens, the backend's name,
drain, logs) composed with each layer's: the service's and every backend's
settings class, so a backend reads its values without knowing the daemon and
every variable keeps one flat ``SANDBOXD_*`` name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sandboxd.backends import BackendName
from sandboxd.backends.docker.settings import DockerSettings
from sandboxd.backends.kubernetes.settings import KubernetesSettings
from sandboxd.backends.local.settings import LocalSettings
from sandboxd.backends.shared.settings import MiB
from sandboxd.service.settings import ServiceSettings
from sandboxd.transports.http.connection_limits import DEFAULT_LIMITS, ConnectionLimits

_GRPC_ENVELOPE_ROOM = 64 * MiB
_HTTP_BODY_ROOM = 1 * MiB


class Settings(ServiceSettings, DockerSettings, KubernetesSettings, LocalSettings):
    model_config = SettingsConfigDict(env_prefix="SANDBOXD_", extra="forbid", frozen=True)

    socket: Path = Field(
        Path("/run/sandboxd/sandboxd.sock"), description="unix socket to serve on (mode 0600)"
    )
    tcp: str | None = Field(None, description="optional TCP address, e.g. 127.0.0.1:50051")
    http: str | None = Field(
        None,
        description="optional HTTP/JSON API and /metrics address, e.g. 127.0.0.1:8080 "
        "(needs tokens like TCP)",
    )
    http_header_timeout_s: float = Field(
        DEFAULT_LIMITS.header_timeout_s,
        gt=0,
        description="HTTP: the whole request head must arrive within this many seconds of the "
        "connection opening or of the previous response (slow bytes do not extend it); "
        "then 408 and close",
    )
    http_body_idle_timeout_s: float = Field(
        DEFAULT_LIMITS.body_idle_timeout_s,
        gt=0,
        description="HTTP: longest pause between two pieces of a request body while the "
        "server reads it; then 408 and close (a body that keeps flowing is never cut)",
    )
    http_max_connections: int = Field(
        DEFAULT_LIMITS.max_connections,
        ge=1,
        description="HTTP: most open connections; the next one is answered 503 at once and closed",
    )
    token: SecretStr | None = Field(
        None, description="a bearer token with full scope for the TCP listener (never logged)"
    )
    tokens_file: Path | None = Field(
        None, description="file of `token [instance-prefix]` lines for the TCP listener"
    )
    backend: BackendName = Field("docker", description="workspace backend")
    egress_upstream_ca: Path | None = Field(
        None,
        description="a PEM file of CAs trusted, besides the system's, for the upstream TLS "
        "the gateway makes towards hosts with a secret (a private CA; tests)",
    )
    drain_seconds: float = Field(
        30.0, ge=0, description="on SIGTERM, how long in-flight calls may finish"
    )
    log_level: str = Field("INFO", description="logging level")
    access_log: bool = Field(
        False, description="one INFO line per call (otherwise DEBUG: high call rates flood INFO)"
    )

    # The transports' envelope limits, derived here from the payload limits so
    # that they move together. Each leaves room above the payload limit so the
    # service, not a transport guard, answers a merely oversize payload with its
    # own message (limit, setting name); payloads may be base64 (x2) on HTTP.

    @property
    def grpc_max_receive_bytes(self) -> int:
        return 2 * self.max_payload_bytes + _GRPC_ENVELOPE_ROOM

    @property
    def grpc_max_send_bytes(self) -> int:
        return 2 * self.max_output_bytes + self.grpc_max_receive_bytes

    @property
    def http_max_body_bytes(self) -> int:
        return 2 * self.max_payload_bytes + _HTTP_BODY_ROOM

    @property
    def http_connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(
            header_timeout_s=self.http_header_timeout_s,
            body_idle_timeout_s=self.http_body_idle_timeout_s,
            max_connections=self.http_max_connections,
        )

    @classmethod
    def from_arguments(cls, **values: Any) -> Settings:
        """These values over the defaults, ignoring every ``SANDBOXD_*`` variable.

        For in-process users (``LocalSandboxFactory``): an agent's environment
        must not reconfigure the library it embeds.
        """
        return _ArgumentsOnly(**values)


class _ArgumentsOnly(Settings):
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)

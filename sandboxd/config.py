"""Configuration: ``SANDBOXD_*`` environment variables, overridden by flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sandboxd.connection_limits import DEFAULT_LIMITS, ConnectionLimits

MiB = 1 << 20
_GRPC_ENVELOPE_ROOM = 64 * MiB
_HTTP_BODY_ROOM = 1 * MiB
#: A workspace disk's default size. Images are sparse (a fresh one takes about
#: 2 MiB of the host's disk; blocks are used as files are written), so the size
#: is a ceiling, not a reservation: room for a repository, its dependencies and
#: build output, while one sandbox can no longer fill the host (SECURITY.md).
DEFAULT_DISK_BYTES = 4 << 30
MIN_DISK_BYTES = 16 * MiB


class Settings(BaseSettings):
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
    backend: Literal["docker", "local"] = Field("docker", description="workspace backend")
    local_root: Path = Field(
        Path("/var/lib/sandboxd/local"), description="folder of the local backend's workspaces"
    )
    namespace: str = Field(
        "default",
        pattern=r"^[a-z0-9][a-z0-9-]{0,30}$",
        description="labels and names everything this daemon creates; daemons in "
        "different namespaces share an engine without seeing each other",
    )
    docker_host: str = Field(
        default_factory=lambda: os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
        description="Docker engine address (unix:// or tcp://)",
    )
    image: str = Field("sandboxd-workspace:latest", description="default workspace image")
    memory_bytes: int = Field(1024 * MiB, ge=16 * MiB, description="default memory limit")
    cpus: float = Field(1.0, gt=0, description="default CPU limit")
    cpu_shares: int = Field(
        512,
        ge=2,
        le=262_144,
        description="CPU weight of every sandbox (docker cpu_shares; cgroup v2 cpu.weight): "
        "all sandboxes equal, and below a default-weight process such as sandboxd itself",
    )
    pids_limit: int = Field(512, ge=16, description="default pids limit")
    tmp_bytes: int = Field(256 * MiB, ge=MiB, description="size of each workspace's /tmp tmpfs")
    disk_bytes: int = Field(
        DEFAULT_DISK_BYTES,
        ge=0,
        description="per-workspace disk limit (docker backend): each volume is a sparse ext4 "
        "image of this size on a loop device; on by default where the host allows it (root, "
        "loop devices, mkfs.ext4: tried once at start, else a warning and no limit, shown in "
        "GetStatus.disk); 0: no limit, volumes share the host disk",
    )
    disk_dir: Path = Field(
        Path("/var/lib/sandboxd/disks"), description="where the workspace disk images live"
    )
    max_payload_bytes: int = Field(
        16 * MiB, ge=1024, description="largest file content one call may carry"
    )
    max_output_bytes: int = Field(
        16 * MiB, ge=1024, description="stdout / stderr kept per exec, each"
    )
    exec_timeout_ms: int = Field(120_000, ge=1000, description="default exec timeout")
    max_exec_timeout_ms: int = Field(3_600_000, ge=1000, description="largest exec timeout")
    pool_size: int = Field(
        2,
        ge=0,
        le=64,
        description="warm workspaces always kept ready for default-option creates (0: off); "
        "the pool grows towards pool_max while creates come in bursts",
    )
    pool_max: int = Field(
        8,
        ge=0,
        le=64,
        description="most warm workspaces the pool grows to under demand (as many as were "
        "claimed in the last 5 minutes)",
    )
    pool_parallel: int = Field(
        2, ge=1, le=16, description="warm workspaces started at the same time when refilling"
    )
    idle_ttl_seconds: int = Field(
        0,
        ge=0,
        description="default idle time after which a workspace's container stops (0: never)",
    )
    idle_check_interval_s: float = Field(
        5.0, gt=0, description="how often idle workspaces are looked for"
    )
    direct_channel: bool = Field(
        True,
        description="talk to each executor over a unix socket inside its container, reached "
        "through /proc/<pid>/root, instead of through Docker's attach stream (faster); "
        "falls back to the attach stream where that is not possible (gVisor, a daemon "
        "without the host's pid namespace)",
    )
    ship_bytecode: bool = Field(
        True,
        description="send each executor its modules compiled by the daemon's python as well "
        "as their sources: a container whose python3 has the same bytecode magic skips "
        "compiling them (~35 ms of CPU per executor start); any other compiles the sources",
    )
    start_timeout_s: float = Field(60.0, gt=0, description="container start to executor ready")
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

    @property
    def executor_max_line_bytes(self) -> int:
        # One executor frame may carry a whole payload and both outputs in base64.
        return (self.max_payload_bytes + 2 * self.max_output_bytes) * 4 // 3 + MiB

    @field_validator("disk_bytes")
    @classmethod
    def _disk_fits_an_ext4(cls, value: int) -> int:
        # Below this mkfs.ext4 makes no usable workspace: said at start, not
        # at every create.
        if 0 < value < MIN_DISK_BYTES:
            raise ValueError(f"disk_bytes must be 0 (no limit) or at least {MIN_DISK_BYTES}")
        return value

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

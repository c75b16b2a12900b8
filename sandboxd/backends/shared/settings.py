"""The settings every workspace backend reads: the namespace, option defaults, payload limits.

Each engine's settings class extends this one (``local/settings.py``), the
container engines' through ``ContainerSettings`` (``docker/settings.py``,
``kubernetes/settings.py``), and the daemon's ``Settings`` composes them all, so
every value is one flat ``SANDBOXD_*`` variable wherever it is read.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sandboxd.backends.shared import bounds

MiB = 1 << 20
GiB = 1 << 30
#: A workspace disk's default size. Images are sparse (a fresh one takes about
#: 2 MiB of the host's disk; blocks are used as files are written), so the size
#: is a ceiling, not a reservation: room for a repository, its dependencies and
#: build output, while one sandbox can no longer fill the host (SECURITY.md).
DEFAULT_DISK_BYTES = 4 << 30
MIN_DISK_BYTES = 16 * MiB
#: The daemon's egress CA certificate in ``state_dir`` (sandboxd/egress/ca.py
#: makes it; hello hands it to every executor to trust: executor/trust.py).
EGRESS_CA_CERT = "egress-ca.pem"


def default_state_dir() -> Path:
    """Root's daemon keeps its state in /var/lib/sandboxd, anyone else's under $HOME."""
    if os.geteuid() == 0:
        return Path("/var/lib/sandboxd")
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "sandboxd"


class WorkspaceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SANDBOXD_", extra="forbid", frozen=True)

    namespace: str = Field(
        "default",
        pattern=r"^[a-z0-9][a-z0-9-]{0,30}$",
        description="labels and names everything this daemon creates; daemons in "
        "different namespaces share an engine without seeing each other",
    )
    image: str = Field("sandboxd-workspace:latest", description="default workspace image")
    memory_bytes: int = Field(1024 * MiB, ge=16 * MiB, description="default memory limit")
    cpus: float = Field(1.0, gt=0, description="default CPU limit")
    pids_limit: int = Field(512, ge=16, description="default pids limit")
    idle_ttl_seconds: int = Field(
        0,
        ge=0,
        description="default idle time after which a workspace's container stops (0: never)",
    )
    max_lifetime_seconds: int = Field(
        0,
        ge=0,
        description="default lifetime after which a sandbox is deleted (0: never)",
    )
    delete_after_stopped_seconds: int = Field(
        0,
        ge=0,
        description="default time after which a stopped sandbox is deleted (0: never)",
    )
    # The operator's maxima (backends/shared/bounds.py): what a request may ask for at most.
    max_memory_bytes: int = Field(
        16 * GiB, ge=16 * MiB, description="largest memory_bytes a sandbox may ask for"
    )
    max_cpus: float = Field(
        default_factory=lambda: float(os.cpu_count() or 1),
        gt=0,
        description="largest cpus a sandbox may ask for (default: the host's CPU count)",
    )
    max_pids_limit: int = Field(
        16_384, ge=16, description="largest pids_limit a sandbox may ask for"
    )
    max_idle_ttl_seconds: int = Field(
        30 * 24 * 3600, ge=0, description="largest idle_ttl_seconds a sandbox may ask for"
    )
    max_lifetime_ceiling_seconds: int = Field(
        30 * 24 * 3600,
        ge=1,
        description="largest max_lifetime_seconds a sandbox may ask for, and the "
        "furthest ExtendSandbox may move its end",
    )
    max_delete_after_stopped_seconds: int = Field(
        30 * 24 * 3600,
        ge=0,
        description="largest delete_after_stopped_seconds a sandbox may ask for",
    )
    max_disk_bytes: int = Field(
        64 * GiB, ge=0, description="largest disk_bytes a sandbox may ask for"
    )
    max_payload_bytes: int = Field(
        16 * MiB, ge=1024, description="largest file content one call may carry"
    )
    max_output_bytes: int = Field(
        16 * MiB, ge=1024, description="stdout / stderr kept per exec, each"
    )

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> WorkspaceSettings:
        bounds.defaults_within_maxima(self)
        return self

    @property
    def executor_max_line_bytes(self) -> int:
        # One executor frame may carry a whole payload and both outputs in base64.
        return (self.max_payload_bytes + 2 * self.max_output_bytes) * 4 // 3 + MiB


class ContainerSettings(WorkspaceSettings):
    """What the container engines (Docker, Kubernetes) read alike: the
    executor's start, the temporary filesystems, the disk, idle checks."""

    tmp_bytes: int = Field(
        256 * MiB, ge=MiB, description="size of each workspace's /tmp and /var/tmp tmpfs"
    )
    disk_bytes: int = Field(
        DEFAULT_DISK_BYTES,
        ge=0,
        description="per-workspace disk limit (docker backend: each volume is a sparse ext4 "
        "image of this size on a loop device; on by default where the host allows it (root, "
        "loop devices, mkfs.ext4: tried once at start, else a warning and no limit, shown in "
        "GetStatus.disk; kubernetes backend: the size of each workspace's claim); 0: no limit, "
        "volumes share the host disk",
    )
    idle_check_interval_s: float = Field(
        5.0, gt=0, description="how often idle workspaces are looked for"
    )
    ship_bytecode: bool = Field(
        True,
        description="send each executor its modules compiled by the daemon's python as well "
        "as their sources: a container whose python3 has the same bytecode magic skips "
        "compiling them (~35 ms of CPU per executor start); any other compiles the sources",
    )
    executor_python: str = Field(
        "/usr/bin/python3",
        pattern=r"^/[^\x00]*$",
        description="absolute path of the workspace image's python3, which runs the executor "
        "as root: never looked up on a PATH (a sandbox's env could point it at a planted one)",
    )
    start_timeout_s: float = Field(60.0, gt=0, description="container start to executor ready")
    state_dir: Path = Field(
        default_factory=default_state_dir,
        description="the daemon's own state: the egress CA (key 0600, made when the first "
        "sandbox with secrets is created) that TLS towards hosts with a secret is terminated "
        "with; default /var/lib/sandboxd for root, else $XDG_STATE_HOME/sandboxd",
    )

    @field_validator("disk_bytes")
    @classmethod
    def _disk_fits_an_ext4(cls, value: int) -> int:
        # Below this mkfs.ext4 makes no usable workspace: said at start, not
        # at every create.
        if 0 < value < MIN_DISK_BYTES:
            raise ValueError(f"disk_bytes must be 0 (no limit) or at least {MIN_DISK_BYTES}")
        return value

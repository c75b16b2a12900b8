"""The Docker backend's settings (``SANDBOXD_*``, composed into the daemon's ``Settings``)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from sandboxd.backends.shared.settings import ContainerSettings


class DockerSettings(ContainerSettings):
    docker_host: str = Field(
        default_factory=lambda: os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
        description="Docker engine address (unix:// or tcp://)",
    )
    cpu_shares: int = Field(
        512,
        ge=2,
        le=262_144,
        description="CPU weight of every sandbox (docker cpu_shares; cgroup v2 cpu.weight): "
        "all sandboxes equal, and below a default-weight process such as sandboxd itself",
    )
    disk_dir: Path = Field(
        Path("/var/lib/sandboxd/disks"), description="where the workspace disk images live"
    )
    disk_reserve_bytes: int = Field(
        2 << 30,
        ge=0,
        description="free space kept on disk_dir's file system: a new disk (create, fork, "
        "the pool) is refused with RESOURCE_EXHAUSTED when less is free",
    )
    template_build_network: bool = Field(
        False,
        description="template builds (BuildTemplate) may use the network: their RUN steps "
        "get Docker's bridge, and ADD may fetch URLs (off: no network at all)",
    )
    template_build_timeout_s: float = Field(
        600.0,
        gt=0,
        description="longest a template build (BuildTemplate, TemplateFromSnapshot) may run: "
        "over it, the build is stopped, what it made removed, and the caller answered "
        "DEADLINE_EXCEEDED",
    )
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
    runsc_pids_limit: int = Field(
        16_384,
        ge=16,
        description="host tasks a gVisor (runsc) container may hold, when its pids_limit is "
        "lower: the engine's pids limit counts gVisor's own threads there, not the "
        "workload's processes (backends/docker/runtimes.py, host_pids_limit)",
    )
    direct_channel: bool = Field(
        True,
        description="talk to each executor over a unix socket inside its container, reached "
        "through /proc/<pid>/root, instead of through Docker's attach stream (faster); "
        "falls back to the attach stream where that is not possible (gVisor, a daemon "
        "without the host's pid namespace)",
    )

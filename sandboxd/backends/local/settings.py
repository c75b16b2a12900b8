"""The local backend's settings (``SANDBOXD_*``, composed into the daemon's ``Settings``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from sandboxd.backends.shared.settings import WorkspaceSettings


class LocalSettings(WorkspaceSettings):
    local_root: Path = Field(
        Path("/var/lib/sandboxd/local"), description="folder of the local backend's workspaces"
    )

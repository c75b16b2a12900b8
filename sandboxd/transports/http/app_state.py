"""What the HTTP app needs from the daemon that runs it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sandboxd.service.sandbox_service import SandboxService
from sandboxd.transports.auth import Authenticator


class Lifecycle(Protocol):
    """The daemon's state, read on every probe and call."""

    @property
    def ready(self) -> bool:
        """Backend started and every listener serving."""
        ...

    @property
    def draining(self) -> bool:
        """Shutting down: in-flight calls finish, new ones are refused."""
        ...


@dataclass(frozen=True)
class AppState:
    service: SandboxService
    authenticator: Authenticator
    lifecycle: Lifecycle

"""How long an HTTP client may take to send a request, and how many may be connected.

Written once here (no dependencies) so that the daemon's settings and the MCP
bridge, which has no settings of its own, share the same defaults; the
protocol that enforces them is ``sandboxd.transports.http.guard``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    #: The whole request head (request line and headers) must arrive within this
    #: many seconds of the connection opening or of the previous response on a
    #: kept-alive connection. Bytes dripping in do not extend it.
    header_timeout_s: float = 10.0
    #: Longest pause between two pieces of a request body while the server is
    #: reading; a body that keeps flowing may take as long as it needs.
    body_idle_timeout_s: float = 30.0
    #: Most connections open at once; the next one is answered 503 at once and closed.
    max_connections: int = 256

    def __post_init__(self) -> None:
        if self.header_timeout_s <= 0 or self.body_idle_timeout_s <= 0:
            raise ValueError("HTTP timeouts must be positive")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


DEFAULT_LIMITS = ConnectionLimits()

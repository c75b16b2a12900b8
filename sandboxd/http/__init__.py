"""The HTTP/JSON API: a second door to the same ``SandboxService``.

FastAPI routes translate JSON to service calls and back, nothing more; the
semantics and validation live in the service, and errors map to HTTP
statuses in one table (``sandboxd.http.errors``). Served by uvicorn inside
the daemon's own event loop (``sandboxd.http.server``).
"""

from sandboxd.http.app import Lifecycle, create_app

__all__ = ["Lifecycle", "create_app"]

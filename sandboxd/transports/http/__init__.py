"""The HTTP/JSON API: a second door to the same ``SandboxService``.

FastAPI routes translate JSON to service calls and back, nothing more; the
semantics and validation live in the service, and errors map to HTTP
statuses in one table (``sandboxd.transports.http.errors``). Served by uvicorn inside
the daemon's own event loop (``sandboxd.transports.http.server``), behind the
slow-client guard (``guard``, ``connection_limits``) that the MCP bridge's
HTTP mode uses too. This package face imports nothing: the guard must load
without FastAPI (the mcp extra has uvicorn but not FastAPI).
"""

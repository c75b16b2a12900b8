"""``sandboxd mcp``: the MCP bridge, a client application of a running daemon.

It speaks gRPC to sandboxd through ``runtime_client`` and MCP to whoever
started it; it never touches the service, so it sits beside ``ctl``, not
among the daemon's transports.
"""

"""Where a sandbox's egress proxies listen, and the workload's environment naming them.

One source: the gateway (sandboxd.egress.gateway) listens on these ports in
the sandbox's loopback, and every backend's hello gives the workload these
variables, so the two cannot drift. Here (not in egress) because backends
sit below egress and both need it.
"""

from __future__ import annotations

#: The sandbox's loopback address both proxies listen on.
PROXY_HOST = "127.0.0.1"
#: HTTP proxy: CONNECT tunnels and plain-HTTP requests in absolute form.
HTTP_PROXY_PORT = 3128
#: SOCKS5 proxy (CONNECT only, no authentication).
SOCKS_PORT = 1080
#: Hosts the workload reaches without a proxy: its own loopback.
NO_PROXY = "localhost,127.0.0.1,::1"


def proxy_env() -> dict[str, str]:
    """The workload's proxy variables, upper and lower case (tools read one or the other)."""
    http = f"http://{PROXY_HOST}:{HTTP_PROXY_PORT}"
    names = {
        "HTTP_PROXY": http,
        "HTTPS_PROXY": http,
        # socks5h: the proxy resolves the name (the sandbox has no DNS).
        "ALL_PROXY": f"socks5h://{PROXY_HOST}:{SOCKS_PORT}",
        "NO_PROXY": NO_PROXY,
    }
    return {**names, **{key.lower(): value for key, value in names.items()}}

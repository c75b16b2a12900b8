"""Egress: what a sandbox may reach, and the gateway that enforces it.

``rules`` reads policies into decisions; the gateway (per sandbox, in the
daemon) serves the proxies the executor listens for on the sandbox's
loopback, resolves, decides, connects and relays.
"""

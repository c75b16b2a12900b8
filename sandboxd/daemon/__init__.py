"""The daemon: assembly (``Daemon``), configuration (``Settings``) and tokens.

The only place that knows every layer: it composes each layer's settings,
picks the backend from the registry, builds the service, loads the bearer
tokens and starts the transports' listeners, and owns signals and draining.
"""

"""sandboxd: a gRPC sandbox daemon with per-instance Docker workspaces."""

__version__ = "0.1.0"

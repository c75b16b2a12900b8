"""Loaded by inspect_ai through the ``inspect_ai`` entry point (pyproject.toml):
importing the environment registers it as "sandboxd-workspace"."""

from runtime_client.contrib.inspect_ai._environment import SandboxdSandboxEnvironment

__all__ = ["SandboxdSandboxEnvironment"]

"""sandboxd sandboxes for inspect_ai evaluations (``pip install 'sandboxd[inspect-ai]'``).

    Task(..., sandbox="sandboxd-workspace")                       # the default daemon
    Task(..., sandbox=SandboxEnvironmentSpec("sandboxd-workspace", SandboxdConfig(target=...)))

Installing the extra registers the environment with inspect (the ``inspect_ai``
entry point); it passes inspect's own ``self_check`` suite (``.testing``).
"""

from sandboxd.contract.extras import require

require("inspect-ai", "runtime_client.contrib.inspect_ai")

from runtime_client.contrib.inspect_ai._config import SandboxdConfig  # noqa: E402
from runtime_client.contrib.inspect_ai._environment import (  # noqa: E402
    SandboxdSandboxEnvironment,
)

__all__ = ["SandboxdConfig", "SandboxdSandboxEnvironment"]

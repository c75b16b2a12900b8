"""sandboxd workspaces for pydantic-ai agents (``pip install 'sandboxd[pydantic-ai]'``).

    from runtime_client.contrib.pydantic_ai import SandboxdWorkspace

    agent = Agent(model, capabilities=[SandboxdWorkspace("unix:///run/sandboxd/sandboxd.sock")])

``SandboxdWorkspace`` is the capability; ``SandboxdWorkspaceBackend`` the
``pydantic_ai.workspaces`` backend it hands each run (``WorkspaceBackend``,
``SupportsCommands``, ``SupportsFilesystem``, ``SupportsRealpath``), passing
pydantic-ai's ``WorkspaceBackendSuite`` (``.testing.SandboxdBackendSuite``).
"""

from sandboxd.contract.extras import require

require("pydantic-ai", "runtime_client.contrib.pydantic_ai")

from runtime_client.contrib.pydantic_ai._backend import (  # noqa: E402
    DEFAULT_ID_PREFIX,
    PROVIDER,
    SandboxdWorkspaceBackend,
)
from runtime_client.contrib.pydantic_ai._capability import SandboxdWorkspace  # noqa: E402

__all__ = ["DEFAULT_ID_PREFIX", "PROVIDER", "SandboxdWorkspace", "SandboxdWorkspaceBackend"]

"""sandboxd as a deepagents sandbox backend (``pip install 'sandboxd[deepagents]'``).

    from runtime_client.contrib.deepagents import SandboxdConnection

    with SandboxdConnection("unix:///run/sandboxd/sandboxd.sock") as sandboxd:
        backend = sandboxd.sandbox("agent-42")        # created, or the existing one
        agent = create_deep_agent(model=model, backend=backend)
        agent.invoke({"messages": [...]})
        sandboxd.delete("agent-42")                   # when the workspace is no longer wanted

``SandboxdSandbox`` implements deepagents' ``SandboxBackendProtocol`` (through
``BaseSandbox``): ``execute`` and the file transfers are sandboxd's own calls,
synchronous and natively asynchronous; ``read``, ``write``, ``edit``, ``ls``,
``grep`` and ``glob`` are deepagents' own, built on them, so the model sees
exactly what it sees on any other deepagents sandbox.
"""

from sandboxd.contract.extras import require

require("deepagents", "runtime_client.contrib.deepagents")

from runtime_client.contrib.deepagents.backend import (  # noqa: E402
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    SandboxdConnection,
    SandboxdSandbox,
)

__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "DEFAULT_TIMEOUT_S", "SandboxdConnection", "SandboxdSandbox"]

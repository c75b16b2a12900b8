"""sandboxd as an openai-agents sandbox (``pip install 'sandboxd[openai-agents]'``).

    from agents import Runner, RunConfig
    from agents.sandbox import SandboxRunConfig
    from runtime_client.contrib.openai_agents import SandboxdSandboxClient

    client = SandboxdSandboxClient("unix:///run/sandboxd/sandboxd.sock")
    run_config = RunConfig(sandbox=SandboxRunConfig(client=client))
    result = await Runner.run(agent, "Fix the failing test", run_config=run_config)

Each session is a sandboxd workspace; ``SandboxdSandboxClientOptions`` asks
for its instance id, sandboxd options and exposed ports (forwarded to a
listener on this host). What sandboxd refuses (users, mounts, host paths)
raises ``SandboxdUnsupportedError`` with the reason.
"""

from sandboxd.contract.extras import require

require("openai-agents", "runtime_client.contrib.openai_agents")

from runtime_client.contrib.openai_agents.client import SandboxdSandboxClient  # noqa: E402
from runtime_client.contrib.openai_agents.errors import SandboxdUnsupportedError  # noqa: E402
from runtime_client.contrib.openai_agents.options import (  # noqa: E402
    SandboxdSandboxClientOptions,
)
from runtime_client.contrib.openai_agents.session import (  # noqa: E402
    SandboxdSandboxSession,
    SandboxdSandboxSessionState,
)

__all__ = [
    "SandboxdSandboxClient",
    "SandboxdSandboxClientOptions",
    "SandboxdSandboxSession",
    "SandboxdSandboxSessionState",
    "SandboxdUnsupportedError",
]

"""sandboxd behind the agent frameworks people already use.

One package per framework, each on top of the gRPC ``Sandbox`` and each needing
its own extra (nothing of a framework is imported unless its package is):

- ``runtime_client.contrib.pydantic_ai`` (``pip install 'sandboxd[pydantic-ai]'``):
  a ``pydantic_ai.workspaces`` backend and the capability that hands it to an agent;
- ``runtime_client.contrib.inspect_ai`` (``pip install 'sandboxd[inspect-ai]'``):
  the inspect_ai sandbox environment ``Task(sandbox="sandboxd-workspace")``;
- ``runtime_client.contrib.openai_agents`` (``pip install 'sandboxd[openai-agents]'``):
  openai-agents' sandbox client ``SandboxdSandboxClient``;
- ``runtime_client.contrib.deepagents`` (``pip install 'sandboxd[deepagents]'``):
  deepagents' sandbox backend ``SandboxdSandbox``;
- ``runtime_client.contrib.claude_agent_sdk`` (``pip install 'sandboxd[mcp]'``):
  the Claude Agent SDK's options for ``sandboxd mcp`` with Claude Code's own tools off.

Each passes its framework's own provider suite against a real daemon
(``tests/frameworks/<framework>``, ``make frameworks-test``).
"""

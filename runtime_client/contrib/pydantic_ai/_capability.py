"""``SandboxdWorkspace``: the capability that gives each agent run a sandboxd workspace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.workspaces import ReadOnlyWorkspace, Workspace, WorkspaceBackend, WorkspaceRef

from runtime_client.contrib._common import instance_id_pattern, transport_for
from runtime_client.contrib.pydantic_ai._backend import (
    DEFAULT_ID_PREFIX,
    PROVIDER,
    SandboxdWorkspaceBackend,
)
from runtime_client.errors import NotFound
from runtime_client.factories import DEFAULT_TARGET
from sandboxd.contract.models import SandboxOptions


@dataclass
class SandboxdWorkspace(AbstractCapability[AgentDepsT]):
    """Gives each run an isolated sandboxd workspace (a Docker container and its
    volume, no network, an unprivileged user), or continues in the one a ref names.

    ```python
    agent = Agent(model, capabilities=[SandboxdWorkspace("unix:///run/sandboxd/sandboxd.sock")])
    result = await agent.run("...")
    await SandboxdWorkspace().destroy(result.workspace.ref)  # when done with it
    ```

    It claims only refs of workspaces it could have made (provider
    ``sandboxd-workspace``, an id of ``id_prefix`` and 128 random bits), so a
    ref in message history cannot point it at another sandbox on the daemon by
    name. Runs never delete their workspace: ``destroy(ref)`` does.
    """

    target: str = DEFAULT_TARGET
    """The daemon's gRPC target: ``unix:///run/sandboxd/sandboxd.sock`` or ``host:port``."""

    _: KW_ONLY

    token: str | None = None
    """Bearer token for a TCP listener (a token scoped to ``id_prefix`` fits)."""

    options: SandboxOptions | None = None
    """How new workspaces are made: image, memory, cpus, network, env, runtime ..."""

    env: Mapping[str, str] | None = None
    """Variables for every command, under each call's own ``env``."""

    id_prefix: str = DEFAULT_ID_PREFIX
    """What the instance ids of new workspaces start with."""

    read_only: bool = False
    """Wrap the workspace in pydantic-ai's ``ReadOnlyWorkspace``."""

    id: str | None = "sandboxd_workspace"
    """Fixed, so a later ``SandboxdWorkspace`` replaces an earlier one whole."""

    @classmethod
    def combine(
        cls, capabilities: Sequence[AbstractCapability[AgentDepsT]]
    ) -> AbstractCapability[AgentDepsT]:
        # The later configuration replaces the earlier whole: a token or env
        # stated only on the replaced one never carries over.
        return capabilities[-1]

    def owns(self, ref: WorkspaceRef) -> bool:
        """Whether ``ref`` names a workspace this capability could have made."""
        return ref.provider == PROVIDER and bool(
            instance_id_pattern(self.id_prefix).fullmatch(ref.id)
        )

    def backend(self, ref: WorkspaceRef | None = None) -> SandboxdWorkspaceBackend:
        """A backend with this configuration, for ``ref`` or a new workspace (no I/O)."""
        return SandboxdWorkspaceBackend(
            self.target,
            ref=ref,
            token=self.token,
            options=self.options,
            env=self.env,
            id_prefix=self.id_prefix,
        )

    def get_workspace(
        self, ctx: RunContext[AgentDepsT], *, ref: WorkspaceRef | None
    ) -> WorkspaceBackend | None:
        if ref is not None and not self.owns(ref):
            return None
        backend = self.backend(ref)
        return ReadOnlyWorkspace(Workspace(backend)) if self.read_only else backend

    async def destroy(self, ref: WorkspaceRef) -> bool:
        """Delete the workspace ``ref`` names (container, volume, files); False if
        it was already gone. Refuses a ref this capability does not own."""
        if not self.owns(ref):
            raise ValueError(f"{ref!r} is not a workspace of this SandboxdWorkspace")
        try:
            await transport_for(self.target, self.token).delete_sandbox(ref.id)
        except NotFound:
            return False
        return True

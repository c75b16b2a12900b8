"""SandboxdWorkspace claims only refs it could have made, and the backend's
refusals are the protocol's typed errors."""

from __future__ import annotations

import pytest
from pydantic_ai.workspaces import WorkspaceRef

from runtime_client.contrib.pydantic_ai import PROVIDER, SandboxdWorkspace, SandboxdWorkspaceBackend
from tests.helpers import Daemon

pytestmark = [pytest.mark.anyio]

MADE_HERE = WorkspaceRef(provider=PROVIDER, id="pydantic-ai-" + "0" * 32)


@pytest.mark.parametrize(
    "ref",
    [
        WorkspaceRef(provider="local", id="/"),  # another provider's
        WorkspaceRef(provider=PROVIDER, id="agent-42"),  # another sandbox on the daemon, by name
        WorkspaceRef(provider=PROVIDER, id="pydantic-ai-0"),  # not of the shape it makes
        WorkspaceRef(provider=PROVIDER, id="pydantic-ai-" + "0" * 32 + "x"),
    ],
)
def test_a_ref_it_could_not_have_made_is_not_claimed(ref: WorkspaceRef) -> None:
    workspace: SandboxdWorkspace[None] = SandboxdWorkspace()
    assert not workspace.owns(ref)
    assert workspace.get_workspace(None, ref=ref) is None  # type: ignore[arg-type]


async def test_its_own_refs_are_claimed_and_others_never_destroyed() -> None:
    workspace: SandboxdWorkspace[None] = SandboxdWorkspace(id_prefix="team-a")
    own = WorkspaceRef(provider=PROVIDER, id="team-a-" + "f" * 32)
    backend = workspace.get_workspace(None, ref=own)  # type: ignore[arg-type]
    assert isinstance(backend, SandboxdWorkspaceBackend) and backend.ref == own
    with pytest.raises(ValueError, match="is not a workspace of this SandboxdWorkspace"):
        await workspace.destroy(MADE_HERE)
    with pytest.raises(ValueError, match="not a sandboxd workspace ref"):
        SandboxdWorkspaceBackend(ref=WorkspaceRef(provider="docker", id="x"))


async def test_a_timeout_past_the_daemons_limit_is_a_value_error(frameworks_daemon: Daemon) -> None:
    workspace: SandboxdWorkspace[None] = SandboxdWorkspace(frameworks_daemon.target)
    backend = workspace.backend()
    try:
        with pytest.raises(ValueError, match="timeout_ms must be between 1 and 3600000"):
            await backend.run(["true"], timeout=7200)
        assert (await backend.run(["true"], timeout=1)).exit_code == 0
    finally:
        assert backend.ref is not None
        await workspace.destroy(backend.ref)

"""``SandboxdSandboxClient``: openai-agents' sandbox client for a sandboxd daemon.

    client = SandboxdSandboxClient("unix:///run/sandboxd/sandboxd.sock")
    run_config = RunConfig(sandbox=SandboxRunConfig(client=client))
    result = await Runner.run(agent, "...", run_config=run_config)

A session is one sandboxd workspace, named by its instance id. ``resume`` finds
it again by that id, whichever process or daemon asks: workspaces outlive
clients and daemon restarts (a restarted daemon adopts them). A workspace that
is gone is created again under the same id and filled from the session's
snapshot, as openai-agents expects of every backend.

``exposed_ports`` need no network in the workspace: ``resolve_exposed_port``
gives a listener on this host's loopback that forwards over the daemon's
channel to the port inside.
"""

from __future__ import annotations

import contextlib
import uuid

from agents.sandbox.errors import WorkspaceStartError
from agents.sandbox.manifest import Manifest
from agents.sandbox.session.dependencies import Dependencies
from agents.sandbox.session.manager import Instrumentation
from agents.sandbox.session.sandbox_client import BaseSandboxClient
from agents.sandbox.session.sandbox_session import SandboxSession
from agents.sandbox.session.sandbox_session_state import SandboxSessionState
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec, resolve_snapshot

from runtime_client.contrib._common import transport_for
from runtime_client.contrib.openai_agents import policy
from runtime_client.contrib.openai_agents.options import SandboxdSandboxClientOptions
from runtime_client.contrib.openai_agents.session import (
    SandboxdSandboxSession,
    SandboxdSandboxSessionState,
)
from runtime_client.errors import NotFound, SandboxdError
from runtime_client.factories import DEFAULT_TARGET
from runtime_client.grpc_transport import GrpcTransport
from runtime_client.sandbox import Sandbox


class SandboxdSandboxClient(BaseSandboxClient[SandboxdSandboxClientOptions | None]):
    """Sessions in sandboxd workspaces (``target``, ``token``: as ``GrpcSandboxFactory``).

    A session without an ``instance_id`` gets ``<id_prefix>-<uuid>``, so a token
    scoped to that prefix can make its workspaces.
    """

    backend_id = "sandboxd"
    #: A run needs no options: each session gets a workspace of its own with the daemon's defaults.
    supports_default_options = True

    def __init__(
        self,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        id_prefix: str = "openai-agents",
        instrumentation: Instrumentation | None = None,
        dependencies: Dependencies | None = None,
    ) -> None:
        super().__init__()
        self.target = target
        self._token = token
        self.id_prefix = id_prefix
        self._instrumentation = instrumentation or Instrumentation()
        self._dependencies = dependencies

    def _transport(self) -> GrpcTransport:
        # One channel per target and event loop, shared by every session on it.
        return transport_for(self.target, self._token)

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: SandboxdSandboxClientOptions | None = None,
    ) -> SandboxSession:
        options = options or SandboxdSandboxClientOptions()
        manifest = self._validate_manifest_for_create(manifest or Manifest())
        policy.check_manifest(manifest)
        session_id = uuid.uuid4()
        instance_id = options.instance_id or f"{self.id_prefix}-{session_id.hex}"
        # Built first: the state checks exposed_ports (1-65535) before a workspace exists.
        state = SandboxdSandboxSessionState(
            session_id=session_id,
            manifest=manifest,
            snapshot=resolve_snapshot(snapshot, str(session_id)),
            instance_id=instance_id,
            options=options,
            exposed_ports=options.exposed_ports,
        )
        await self._create_workspace(instance_id, options, manifest)
        inner = SandboxdSandboxSession(Sandbox(self._transport(), instance_id), state)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        if not isinstance(state, SandboxdSandboxSessionState):
            raise TypeError("SandboxdSandboxClient.resume expects a SandboxdSandboxSessionState")
        state.assert_path_grants_rebound()
        policy.check_manifest(state.manifest)
        transport = self._transport()
        try:
            await transport.get_sandbox(state.instance_id)
            preserved = True
        except NotFound:
            # Gone (deleted, or its host lost): the same id, made again; start()
            # restores the snapshot into it.
            await self._create_workspace(state.instance_id, state.options, state.manifest)
            state.workspace_root_ready = False
            preserved = False
        inner = SandboxdSandboxSession(Sandbox(transport, state.instance_id), state)
        inner._set_start_state_preserved(preserved)
        return self._wrap_session(inner, instrumentation=self._instrumentation)

    async def delete(self, session: SandboxSession) -> SandboxSession:
        """Remove the session's workspace and its files (an already removed one is fine)."""
        inner = session._inner
        if not isinstance(inner, SandboxdSandboxSession):
            raise TypeError("SandboxdSandboxClient.delete expects a sandboxd session")
        await inner.shutdown()
        with contextlib.suppress(NotFound):
            await Sandbox(self._transport(), inner.instance_id).delete()
        return session

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self._deserialize_session_state_payload(payload, SandboxdSandboxSessionState)

    async def _create_workspace(
        self, instance_id: str, options: SandboxdSandboxClientOptions, manifest: Manifest
    ) -> None:
        # The manifest's environment lives on the workspace, as a container's does on
        # Docker; its default root is sandboxd's default working folder (warm pool).
        env = await manifest.environment.resolve()
        workdir = "" if manifest.root == policy.DEFAULT_ROOT else manifest.root
        try:
            await self._transport().create_sandbox(
                instance_id, options.sandbox_options(env=env, workdir=workdir)
            )
        except SandboxdError as exc:
            raise WorkspaceStartError(
                path=manifest.root,  # type: ignore[arg-type]
                cause=exc,
                message=f"sandboxd could not create workspace {instance_id!r}: {exc}",
                retryable=False,
            ) from exc

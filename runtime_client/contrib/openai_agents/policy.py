"""What an openai-agents manifest or option may ask of a sandboxd workspace.

Checked when a session is created or resumed, so a request sandboxd cannot
honour fails at once with the reason (``SandboxdUnsupportedError``) instead of
as an exit code from ``useradd`` or a mount helper halfway through a run.
"""

from __future__ import annotations

from agents.sandbox.errors import OpName
from agents.sandbox.manifest import Manifest

from runtime_client.contrib._common import HOST_MOUNT_REFUSED, USER_SWITCH_REFUSED
from runtime_client.contrib.openai_agents.errors import SandboxdUnsupportedError

#: The workspace root openai-agents assumes by default; it is sandboxd's too, so a
#: manifest that keeps it needs no ``workdir`` option (and may get a warm workspace).
DEFAULT_ROOT: str = Manifest.model_fields["root"].default


def check_manifest(manifest: Manifest) -> None:
    """Refuse what a sandboxd workspace cannot provide, naming it and why."""
    if manifest.users or manifest.groups:
        names = sorted({u.name for u in manifest.users} | {g.name for g in manifest.groups})
        raise SandboxdUnsupportedError(
            f"manifest users and groups ({', '.join(names)})",
            "by_design",
            "sandboxd runs everything in a workspace as its one unprivileged user; creating "
            "accounts needs root, which no workspace has, by design",
        )
    mounts = manifest.mount_targets()
    if mounts:
        raise SandboxdUnsupportedError(
            f"mounts ({', '.join(sorted(path.as_posix() for _, path in mounts))})",
            "by_design",
            "sandboxd gives a workspace no FUSE, no SYS_ADMIN and no volume of the host, by "
            "design; copy the files in instead (LocalDir/LocalFile entries)",
        )
    host_grants = [grant.path for grant in manifest.extra_path_grants if grant.host_path]
    if host_grants:
        raise SandboxdUnsupportedError(
            f"host path grants ({', '.join(sorted(host_grants))})",
            "by_design",
            HOST_MOUNT_REFUSED,
        )


def check_user(user: str | None, workspace_user: str, *, op: OpName) -> None:
    """``user`` may only name the workspace's own user (or be omitted)."""
    if user is not None and user != workspace_user:
        raise SandboxdUnsupportedError(
            f"{op} as user {user!r}", "by_design", USER_SWITCH_REFUSED.format(user=user), op=op
        )

"""Secrets at create: checked, their placeholders put where the caller chose,
their values handed to the egress gateway's book (issue 25, item 4).

The sandbox gets only placeholders (contract.secrets.placeholder): in the
workload's environment (``env``) or in a file (``file``, written by the
executor as the sandbox user, mode 0444). The values live in the daemon's
``SecretBook``, in memory: a daemon restart forgets them, and a create of the
same id with the same secrets (the values again) gives them back.
"""

from __future__ import annotations

import dataclasses

from sandboxd.contract.errors import InvalidArgument
from sandboxd.contract.models import SandboxOptions
from sandboxd.contract.secrets import Secret, placeholder, validate
from sandboxd.egress.book import SecretBook
from sandboxd.service.ports import Workspace


def with_placeholders(
    book: SecretBook, instance_id: str, options: SandboxOptions
) -> SandboxOptions:
    """``options`` with its secrets checked (hosts normalised) and each ``env``
    secret's placeholder in the workload's environment."""
    if not options.secrets:
        return options
    book.ready()  # the daemon's CA, made the first time (SandboxUnavailable if it cannot be)
    secrets = validate(options.secrets)
    env = dict(options.env)
    for secret in secrets:
        if not secret.env:
            continue
        if secret.env in env:
            raise InvalidArgument(
                f"secret {secret.name!r}: env {secret.env!r} is also set in options.env; "
                "the secret's placeholder goes there, drop one of them"
            )
        env[secret.env] = placeholder(instance_id, secret.name)
    return dataclasses.replace(options, env=env, secrets=secrets)


async def deliver(
    book: SecretBook, workspace: Workspace, instance_id: str, secrets: tuple[Secret, ...]
) -> None:
    """Write the ``file`` secrets' placeholders, then give the gateway the values."""
    for secret in secrets:
        if secret.file:
            await workspace.call(
                "write_file",
                {
                    "path": secret.file,
                    "data": placeholder(instance_id, secret.name).encode(),
                    "create_parents": True,
                    "expected_sha256": None,
                    "mode": 0o444,
                },
            )
    book.set(instance_id, secrets)

"""Two daemons serving one sandbox at the same time, on a real engine.

Two in-process DockerBackends of the same namespace (two replicas of one
deployment, or a daemon and a second one on the same engine) each hold their
own direct channel to the same executor. Every call is answered on the
channel it came on, and neither daemon's hello takes the sandbox from the
other: no reconnects while both call (the hellos are counted).
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandboxd.backends.docker.workspace import DockerWorkspace
from sandboxd.contract.models import SandboxOptions
from tests.docker_fixtures import IMAGE, RUN_PREFIX

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(240)]

CALLS = 50


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[list[Any]]:
    from sandboxd.backends.docker.backend import DockerBackend
    from sandboxd.daemon.settings import Settings

    settings = Settings.model_validate(
        {
            "namespace": f"{RUN_PREFIX}-replicas-{secrets.token_hex(2)}",
            "image": IMAGE,
            "pool_size": 0,
            "disk_bytes": 0,
            "disk_dir": tmp_path / "disks",
        }
    )
    backends = [DockerBackend(settings), DockerBackend(settings)]
    for backend in backends:
        await backend.start()
    yield backends
    for backend in backends:
        await backend.close()


async def test_two_daemons_call_one_sandbox_at_once_without_taking_it_from_each_other(
    replicas: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandboxd.backends.shared.options import effective

    hellos: Counter[int] = Counter()
    handshake = DockerWorkspace._handshake

    async def counted(self: DockerWorkspace, *args: Any) -> Any:
        hellos[id(self)] += 1
        return await handshake(self, *args)

    monkeypatch.setattr(DockerWorkspace, "_handshake", counted)
    one, two = replicas
    instance_id = f"replicas-{secrets.token_hex(3)}"
    options = SandboxOptions()
    await one.create(instance_id, options, effective(options, one.settings))
    try:
        workspaces = [await one.workspace(instance_id), await two.workspace(instance_id)]
        for workspace in workspaces:
            await workspace.ensure_running()
            assert workspace.channel_kind == "direct"
        settled = sum(hellos.values())
        answered = [0, 0]

        async def calls(n: int) -> None:
            workspace = workspaces[n]
            for i in range(CALLS):
                tag = f"{n}-{i}"
                if i % 2 == 0:
                    command = f"echo {tag} >> /workspace/log-{n}; echo {tag}"
                    result = await workspace.call(
                        "tool", {"name": "bash", "args": {"command": command}}
                    )
                    assert not result["is_error"], result
                    assert result["text"].startswith(f"{tag}\n"), result
                else:
                    result = await workspace.call(
                        "tool", {"name": "read", "args": {"file_path": f"/workspace/log-{n}"}}
                    )
                    lines = [line.split("\t", 1)[1] for line in result["text"].splitlines()]
                    assert lines == [f"{n}-{k}" for k in range(0, i, 2)], result
                answered[n] += 1

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(calls, 0)
            group.start_soon(calls, 1)
        elapsed = time.monotonic() - started
        assert answered == [CALLS, CALLS]
        # Neither reconnected: one hello each on the attach stream and one on
        # its direct channel, all before the calls.
        assert settled == 4
        assert sum(hellos.values()) == settled, (dict(hellos), f"{elapsed:.1f} s")
        assert all(w.connected and w.channel_kind == "direct" for w in workspaces)
    finally:
        await one.delete(instance_id)

"""pytest plugin: a fresh sandbox per test, removed afterwards.

Installed with sandboxd (a ``pytest11`` entry point), or ``-p runtime_client.pytest_plugin``::

    async def test_build(sandbox):
        await sandbox.write("main.py", "print('ok')\\n")
        result = await sandbox.bash("python3 main.py")
        assert result.text.startswith("ok")

    @pytest.mark.sandbox_backend("grpc")       # this test on a sandboxd daemon
    async def test_two(sandbox_factory):
        a = await sandbox_factory.create_sandbox()
        b = await sandbox_factory.create_sandbox()

Backends: ``local`` (a folder under the test's tmp_path, no isolation; the
default) or ``grpc`` (a running sandboxd at ``--sandbox-target``, default
``$SANDBOXD_TARGET`` or the standard socket). The marker beats
``--sandbox-backend``, which beats the ``sandbox_backend`` ini value.

The fixtures are async and run on anyio's pytest plugin (installed with
anyio): a test that uses them needs no marker of its own. grpc.aio needs
asyncio, so under any other anyio backend they skip.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import pytest

# pytest loads this plugin in every run where sandboxd is installed: the client
# (grpc, the local backend) is imported only by a test that uses the fixtures.
if TYPE_CHECKING:
    from runtime_client.factories import GrpcSandboxFactory, LocalSandboxFactory
    from runtime_client.sandbox import Sandbox

Backend = Literal["local", "grpc"]
BACKENDS: tuple[Backend, ...] = ("local", "grpc")
DEFAULT_TARGET = "unix:///run/sandboxd/sandboxd.sock"
MARKER = "sandbox_backend"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sandboxd", "sandboxd sandboxes (runtime_client.pytest_plugin)")
    group.addoption(
        "--sandbox-backend",
        choices=BACKENDS,
        default=None,
        help="backend of the `sandbox` fixtures: local (default) or grpc",
    )
    group.addoption(
        "--sandbox-target",
        default=None,
        help="sandboxd gRPC target for the grpc backend "
        f"(env SANDBOXD_TARGET, default {DEFAULT_TARGET})",
    )
    group.addoption(
        "--sandbox-token", default=None, help="bearer token for a TCP target (env SANDBOXD_TOKEN)"
    )
    parser.addini(MARKER, "default backend of the `sandbox` fixtures (local or grpc)", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(name): run this test's `sandbox` fixtures on backend `local` or `grpc`",
    )


def _backend(request: pytest.FixtureRequest) -> Backend:
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None:
        name = marker.args[0] if marker.args else marker.kwargs.get("name")
    else:
        name = request.config.getoption("--sandbox-backend") or request.config.getini(MARKER)
    name = name or "local"
    if name not in BACKENDS:
        raise pytest.UsageError(f"sandbox backend must be one of {BACKENDS}, not {name!r}")
    return cast(Backend, name)


def _unique_id(request: pytest.FixtureRequest) -> str:
    # Readable in `sandboxctl list`, unique across runs, within the id rules.
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-._")[:80] or "test"
    return f"pytest-{stem}-{secrets.token_hex(4)}"


class IsolatedSandboxFactory:
    """A ``SandboxFactory`` that remembers what it created and removes it after the test.

    Hand it to an ``Agent`` as its ``sandbox``: each run's workspace is
    thrown away with the test. ``create_sandbox()`` without an id makes a
    fresh one named after the test.
    """

    def __init__(
        self, inner: GrpcSandboxFactory | LocalSandboxFactory, backend: Backend, id_stem: str
    ) -> None:
        self.inner = inner
        self.backend = backend
        self._id_stem = id_stem
        self._count = 0
        self.created: list[Sandbox] = []

    async def create_sandbox(
        self, instance_id: str | None = None, *, cwd: str | None = None
    ) -> Sandbox:
        if instance_id is None:
            self._count += 1
            instance_id = f"{self._id_stem}-{self._count}"
        sandbox = await self.inner.create_sandbox(instance_id, cwd=cwd)
        if all(s.instance_id != instance_id for s in self.created):
            self.created.append(sandbox)
        return sandbox

    async def cleanup(self) -> None:
        from runtime_client.errors import NotFound, SandboxdError

        problems: list[str] = []
        for sandbox in reversed(self.created):
            try:
                await sandbox.delete()
            except NotFound:
                pass  # the test deleted it itself
            except SandboxdError as exc:
                problems.append(f"{sandbox.instance_id}: {exc}")
        self.created.clear()
        if problems:
            raise RuntimeError("could not remove test sandboxes: " + "; ".join(problems))


@pytest.fixture
def sandbox_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend this test's sandboxes use (marker, option, ini, else local)."""
    return _backend(request)


@pytest.fixture
async def sandbox_factory(
    request: pytest.FixtureRequest,
    sandbox_backend: Backend,
    tmp_path: Path,
    anyio_backend: Any,
) -> AsyncIterator[IsolatedSandboxFactory]:
    """Creates sandboxes on the chosen backend; every one is removed after the test."""
    backend_name = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]
    if backend_name != "asyncio":
        pytest.skip("sandboxd's client (grpc.aio) runs on asyncio only")
    from runtime_client.factories import GrpcSandboxFactory, LocalSandboxFactory
    from sandboxd.contract.models import SandboxOptions

    inner: GrpcSandboxFactory | LocalSandboxFactory
    if sandbox_backend == "grpc":
        config = request.config
        target = (
            config.getoption("--sandbox-target")
            or os.environ.get("SANDBOXD_TARGET")
            or DEFAULT_TARGET
        )
        token = config.getoption("--sandbox-token") or os.environ.get("SANDBOXD_TOKEN")
        inner = GrpcSandboxFactory(target, token=token, options=SandboxOptions())
    else:
        inner = LocalSandboxFactory(tmp_path / "sandboxes")
    factory = IsolatedSandboxFactory(inner, sandbox_backend, _unique_id(request))
    try:
        yield factory
    finally:
        try:
            await factory.cleanup()
        finally:
            await inner.aclose()


@pytest.fixture
async def sandbox(sandbox_factory: IsolatedSandboxFactory) -> Sandbox:
    """A fresh, empty workspace for this test alone."""
    return await sandbox_factory.create_sandbox()

"""Secrets through the service (a real local backend and executor): placeholders
where the caller chose, values only in the daemon's book, never read back; and the
executor's trust of the daemon's CA from hello."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sandboxd.backends.local.backend import LocalBackend
from sandboxd.backends.shared.session import hello_args
from sandboxd.backends.shared.settings import EGRESS_CA_CERT
from sandboxd.contract.errors import AlreadyExists, InvalidArgument, SandboxUnavailable
from sandboxd.contract.models import ExecRequest, SandboxOptions
from sandboxd.contract.secrets import Secret, placeholder
from sandboxd.daemon.settings import Settings
from sandboxd.egress.ca import CertificateAuthority
from sandboxd.executor import trust
from sandboxd.executor.dispatch import Executor
from sandboxd.service.sandbox_service import SandboxService

pytestmark = pytest.mark.unit

VALUE = "real-value-5e4d3c2b1a"


def test_create_puts_placeholders_and_keeps_values_in_the_book(tmp_path: Path) -> None:
    settings = Settings.from_arguments(backend="local", local_root=tmp_path / "root")
    backend = LocalBackend(settings)
    service = SandboxService(backend, settings)
    token_file = tmp_path / "secrets" / "token"
    secrets = (
        Secret("TOKEN", VALUE, ("API.test.",), env="TOKEN"),
        Secret("FILED", VALUE + "-f", ("api.test",), file=str(token_file)),
    )

    async def run() -> None:
        await backend.start()
        try:
            _, created = await service.create_sandbox("sb", SandboxOptions(secrets=secrets))
            assert created
            result = await service.exec("sb", ExecRequest(shell="echo $TOKEN"))
            assert result.stdout.decode().strip() == placeholder("sb", "TOKEN")
            assert token_file.read_text() == placeholder("sb", "FILED")
            assert token_file.stat().st_mode & 0o777 == 0o444
            book = service.secrets.for_host("sb", "api.test")
            assert set(book.values()) == {VALUE.encode(), (VALUE + "-f").encode()}
            # Read back: names, hosts and places; never a value.
            got = await service.get_sandbox("sb")
            assert [s.name for s in got.options.secrets] == ["TOKEN", "FILED"]
            assert got.options.secrets[0].hosts == ("api.test",)
            assert all(not s.value for s in got.options.secrets)
            assert VALUE not in repr(got) and VALUE not in str(got.options.to_json())
            # The same create again (the values again, e.g. after a daemon restart): fine.
            _, again = await service.create_sandbox("sb", SandboxOptions(secrets=secrets))
            assert not again
            # A create or get without secrets leaves them as they are.
            await service.create_sandbox("sb", SandboxOptions())
            assert len(service.secrets.for_host("sb", "api.test")) == 2
            with pytest.raises(AlreadyExists):
                await service.create_sandbox(
                    "sb",
                    SandboxOptions(secrets=(Secret("TOKEN", VALUE, ("b.test",), env="TOKEN"),)),
                )
            with pytest.raises(InvalidArgument, match=r"also set in options\.env"):
                await service.create_sandbox(
                    "sb2", SandboxOptions(env={"TOKEN": "x"}, secrets=secrets[:1])
                )
            with pytest.raises(InvalidArgument, match="a fork takes no secrets"):
                await service.fork_sandbox("sb", "sb-fork", SandboxOptions(secrets=secrets[:1]))
            await service.delete_sandbox("sb")
            assert service.secrets.for_host("sb", "api.test") == {}
        finally:
            await backend.close()

    asyncio.run(run())
    # Nothing of the value reached the sandbox's files or the backend's records.
    for path in (tmp_path / "root").rglob("*"):
        if path.is_file():
            assert VALUE.encode() not in path.read_bytes(), path


def test_hello_gives_the_workload_a_bundle_with_the_daemon_ca(tmp_path: Path) -> None:
    state = tmp_path / "daemon-state"
    ca = CertificateAuthority.load_or_create(state)
    settings = Settings.from_arguments(backend="docker", state_dir=state)
    args = hello_args(SandboxOptions(env={"CURL_CA_BUNDLE": "/mine.pem"}), settings)
    assert args["trust"] == ca.cert_pem.decode()
    assert "PRIVATE" not in args["trust"]
    work = tmp_path / "work"
    work.mkdir()
    ex = Executor(str(work), state_dir=str(tmp_path / "exec-state"), base_env={"HOME": "/h"})
    os.makedirs(ex.state_dir)
    ex.handle("hello", args)
    bundle = Path(ex.base_env["SSL_CERT_FILE"]).read_text()
    assert bundle.endswith(ca.cert_pem.decode())
    system = next((p for p in trust.SYSTEM_BUNDLES if os.path.exists(p)), None)
    if system is not None:  # the image's own trust is kept
        assert bundle.startswith(Path(system).read_text()[:200])
    assert Path(ex.base_env["NODE_EXTRA_CA_CERTS"]).read_text() == ca.cert_pem.decode()
    assert ex.base_env["GIT_SSL_CAINFO"] == ex.base_env["SSL_CERT_FILE"]
    assert Path(ex.base_env["WGETRC"]).read_text() == (
        f"ca_certificate = {ex.base_env['SSL_CERT_FILE']}\n"
    )
    assert ex.base_env["CURL_CA_BUNDLE"] == "/mine.pem"  # the sandbox's own env wins
    # Without a CA in the state folder hello carries none.
    (state / EGRESS_CA_CERT).unlink()
    assert "trust" not in hello_args(SandboxOptions(), settings)


def test_the_ca_is_made_with_the_first_secrets_and_never_without(tmp_path: Path) -> None:
    from sandboxd.daemon.assembly import Daemon

    state = tmp_path / "state"
    settings = Settings.from_arguments(
        backend="local", local_root=tmp_path / "root", state_dir=state, socket=tmp_path / "s.sock"
    )
    daemon = Daemon(settings)

    async def run() -> None:
        await daemon.backend.start()
        try:
            await daemon.service.create_sandbox("plain", SandboxOptions())
            assert not state.exists()  # a daemon never given secrets writes nothing there
            secret = Secret("T", VALUE, ("a.test",), env="T")
            await daemon.service.create_sandbox("sb", SandboxOptions(secrets=(secret,)))
            assert (state / EGRESS_CA_CERT).exists()
            assert daemon.interceptor.wants("sb", "a.test")
        finally:
            await daemon.backend.close()

    asyncio.run(run())


def test_a_daemon_without_a_ca_refuses_secrets_and_serves_the_rest(tmp_path: Path) -> None:
    from sandboxd.daemon.assembly import Daemon

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    settings = Settings.from_arguments(
        backend="local",
        local_root=tmp_path / "root",
        state_dir=blocker / "state",
        socket=tmp_path / "s.sock",
    )
    daemon = Daemon(settings)

    async def run() -> None:
        await daemon.backend.start()
        try:
            with pytest.raises(SandboxUnavailable, match="SANDBOXD_STATE_DIR"):
                await daemon.service.create_sandbox(
                    "sb", SandboxOptions(secrets=(Secret("T", VALUE, ("a.test",), env="T"),))
                )
            _, created = await daemon.service.create_sandbox("sb", SandboxOptions())
            assert created
        finally:
            await daemon.backend.close()

    asyncio.run(run())

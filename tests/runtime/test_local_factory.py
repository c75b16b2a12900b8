"""LocalSandboxFactory is configured by its arguments, never by SANDBOXD_* variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_client import LocalSandboxFactory, ResourceExhausted

pytestmark = pytest.mark.anyio

DEFAULT_PAYLOAD = 16 << 20  # sandboxd.daemon.settings.Settings.max_payload_bytes


async def test_sandboxd_variables_do_not_reach_the_local_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOXD_MAX_PAYLOAD_BYTES", "2048")
    monkeypatch.setenv("SANDBOXD_BACKEND", "docker")
    monkeypatch.setenv("SANDBOXD_LOCAL_ROOT", str(tmp_path / "elsewhere"))
    async with LocalSandboxFactory(tmp_path / "root") as factory:
        assert factory.service.settings.max_payload_bytes == DEFAULT_PAYLOAD
        box = await factory.create_sandbox("env-1")
        written = await box.write_file("big.bin", b"x" * 8192)
        assert written.size == 8192
    assert (tmp_path / "root" / "env-1" / "big.bin").stat().st_size == 8192
    assert not (tmp_path / "elsewhere").exists()


async def test_limits_are_plain_arguments(tmp_path: Path) -> None:
    async with LocalSandboxFactory(tmp_path, max_payload_bytes=2048) as factory:
        box = await factory.create_sandbox("arg-1")
        with pytest.raises(ResourceExhausted):
            await box.write_file("big.bin", b"x" * 8192)
        assert (await box.write_file("small.bin", b"x" * 1024)).size == 1024


def test_daemon_settings_still_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same variable does configure the daemon: the factory's ignoring it is deliberate.
    from sandboxd.daemon.settings import Settings

    monkeypatch.setenv("SANDBOXD_MAX_PAYLOAD_BYTES", "2048")
    assert Settings().max_payload_bytes == 2048
    assert Settings.from_arguments().max_payload_bytes == DEFAULT_PAYLOAD

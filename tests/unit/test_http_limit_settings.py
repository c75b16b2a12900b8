"""The HTTP slow-client limits are settings like the others: defaults written once,
``SANDBOXD_*`` variables, ``sandboxd serve`` flags with descriptions."""

from __future__ import annotations

import pytest

from sandboxd import cli
from sandboxd.daemon.settings import Settings
from sandboxd.transports.http.connection_limits import DEFAULT_LIMITS, ConnectionLimits

pytestmark = pytest.mark.unit


def test_the_defaults_come_from_one_place() -> None:
    assert Settings().http_connection_limits == DEFAULT_LIMITS


def test_the_environment_sets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOXD_HTTP_HEADER_TIMEOUT_S", "2.5")
    monkeypatch.setenv("SANDBOXD_HTTP_BODY_IDLE_TIMEOUT_S", "7")
    monkeypatch.setenv("SANDBOXD_HTTP_MAX_CONNECTIONS", "9")
    assert Settings().http_connection_limits == ConnectionLimits(2.5, 7.0, 9)


@pytest.mark.parametrize(
    "field", ["http_header_timeout_s", "http_body_idle_timeout_s", "http_max_connections"]
)
def test_nonsense_values_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Settings(**{field: 0})  # type: ignore[arg-type]


def test_serve_has_a_described_flag_for_each(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--http-header-timeout-s", "--http-body-idle-timeout-s", "--http-max-connections"):
        assert flag in text
    assert "then 408 and close" in text and "answered 503" in text

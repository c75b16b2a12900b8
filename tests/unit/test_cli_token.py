"""A token given on the command line is visible in ps: the CLI says so."""

from __future__ import annotations

import pytest

from sandboxd import cli

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("argv", [["mcp", "--token", "s3cret"], ["mcp", "--token=s3cret"]])
def test_token_on_the_command_line_warns(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    cli._warn_token_on_command_line(argv)
    assert cli.TOKEN_WARNING in capsys.readouterr().err


def test_token_from_the_environment_does_not_warn(capsys: pytest.CaptureFixture[str]) -> None:
    cli._warn_token_on_command_line(["mcp", "--instance", "x"])
    assert capsys.readouterr().err == ""


def test_serve_with_a_token_flag_warns_too(capsys: pytest.CaptureFixture[str]) -> None:
    cli._warn_token_on_command_line(["serve", "--token", "s3cret", "--tcp", "127.0.0.1:0"])
    assert cli.TOKEN_WARNING in capsys.readouterr().err

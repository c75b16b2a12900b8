"""The README's frameworks table says what this tier runs: the pinned versions
and each provider suite's size and outcome (drift test)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from inspect_ai.util._sandbox import self_check
from langchain_tests.integration_tests import SandboxIntegrationTests
from pydantic_ai.workspaces.conformance import WorkspaceBackendSuite

from runtime_client.contrib.inspect_ai.testing import REFUSED_BY_DESIGN
from tests.frameworks.claude_agent_sdk import test_mcp_recipe as claude_agent_sdk_recipe
from tests.frameworks.deepagents import test_provider_suite as deepagents_suite
from tests.frameworks.openai_agents import test_provider_suite as openai_agents_suite

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
PINS = dict(
    line.split("==", 1)
    for line in (ROOT / "tests/frameworks/constraints.txt").read_text().splitlines()
    if "==" in line
)


def _row(distribution: str) -> str:
    match = re.search(rf"^\| {re.escape(distribution)} (\S+) \|.*$", README, re.MULTILINE)
    assert match is not None, f"no row for {distribution} in the README's frameworks table"
    assert match.group(1) == PINS[distribution], "the README names another version than the pin"
    if metadata.version(distribution) != PINS[distribution]:
        pytest.skip(f"{distribution} {metadata.version(distribution)} is not the pinned one")
    return match.group(0)


def test_pydantic_ai_row() -> None:
    row = _row("pydantic-ai-slim")
    rules = [name for name in dir(WorkspaceBackendSuite) if name.startswith("test_")]
    assert f"**{len(rules)} of {len(rules)} rules pass**, none skipped" in row


def test_inspect_ai_row() -> None:
    row = _row("inspect-ai")
    checks, refused = len(self_check.__all__), len(REFUSED_BY_DESIGN)
    assert f"**{checks - refused} of {checks} pass**; {refused} expected failure" in row
    for name in REFUSED_BY_DESIGN:
        assert f"`{name}`" in row


def _cases(module: ModuleType) -> int:
    """The tests a module holds, each parametrized case counted."""
    count = 0
    for name, function in vars(module).items():
        if name.startswith("test_") and callable(function):
            cases = 1
            for mark in getattr(function, "pytestmark", []):
                if mark.name == "parametrize":
                    cases *= len(mark.args[1])
            count += cases
    return count


def _expected_failures(cls: type) -> list[str]:
    return [
        name
        for name in dir(cls)
        if name.startswith("test_")
        and any(mark.name == "xfail" for mark in getattr(getattr(cls, name), "pytestmark", []))
    ]


def test_deepagents_row() -> None:
    row = _row("deepagents")
    suite = [name for name in dir(SandboxIntegrationTests) if name.startswith("test_")]
    expected = _expected_failures(deepagents_suite.TestSandboxdSandbox)
    passing = len(suite) - len(expected)
    assert f"langchain-tests {PINS['langchain-tests']} `SandboxIntegrationTests`" in row
    assert f"**{passing} of {len(suite)} pass**; {len(expected)} expected failures" in row
    assert [name for name in re.findall(r"`(test_\w+)`", row)] == sorted(expected)


def test_openai_agents_row() -> None:
    row = _row("openai-agents")
    cases = _cases(openai_agents_suite)
    assert f"**{cases} of {cases} pass**, none skipped" in row


def test_claude_agent_sdk_row() -> None:
    row = _row("claude-agent-sdk")
    cases = _cases(claude_agent_sdk_recipe)
    assert f"(**{cases} of {cases} pass**)" in row

"""Shared pytest configuration for every test tier."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

# The Docker and Kubernetes fixtures serve their tiers and the conformance suite's
# backends on those engines.
pytest_plugins = ["tests.docker_fixtures", "tests.kubernetes_fixtures"]

# The tiers, most demanding first: a test's tier is the first of these it carries.
TIERS = ("kubernetes", "frameworks", "docker", "conformance", "inproc", "unit")
#: Tiers that need a real Docker engine: under CI=true none of their tests may skip.
DOCKER_TIERS = ("frameworks", "docker")

# Each test directory's tier. A test module may still name a more demanding
# one itself (e.g. tests/runtime/test_swap_docker.py is docker); every test
# ends up with exactly the markers that say what it needs.
DIRECTORY_TIERS = {
    "unit": "unit",
    "runtime": "unit",
    "grpc": "inproc",
    "http": "inproc",
    "fuzz": "inproc",
    "ecosystem": "inproc",
    "conformance": "conformance",
    "docker": "docker",
    "hostile": "docker",
    # Agent frameworks' own provider suites against a real daemon on Docker. They
    # run in a virtualenv of their own (`make frameworks-test`), which sets
    # SANDBOXD_FRAMEWORKS=1; .venv has none of the frameworks installed.
    "frameworks": "frameworks",
    "kubernetes": "kubernetes",
}
FRAMEWORKS_DIR = Path(__file__).parent / "frameworks"
# The kubernetes tier needs the test cluster (make k8s) and the `kubernetes`
# extra. Until `make test` brings the cluster up, the tier is collected when
# asked for: SANDBOXD_K8S_TESTS=1, or a path under tests/kubernetes given.
KUBERNETES_DIR = Path(__file__).parent / "kubernetes"


def _kubernetes_tier_asked(config: pytest.Config) -> bool:
    if os.environ.get("SANDBOXD_K8S_TESTS") == "1":
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == KUBERNETES_DIR or KUBERNETES_DIR in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == FRAMEWORKS_DIR and os.environ.get("SANDBOXD_FRAMEWORKS") != "1":
        return True
    if collection_path == KUBERNETES_DIR and not _kubernetes_tier_asked(config):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_root = Path(__file__).parent
    for item in items:
        if any(item.get_closest_marker(tier) for tier in TIERS):
            continue
        try:
            directory = item.path.relative_to(tests_root).parts[0]
        except ValueError:
            continue  # not one of ours (e.g. a pytester inner run)
        tier = DIRECTORY_TIERS.get(directory)
        if tier is None:
            raise pytest.UsageError(
                f"{item.nodeid}: tests/{directory} has no tier in tests/conftest.py DIRECTORY_TIERS"
            )
        item.add_marker(tier)


@pytest.fixture
def anyio_backend() -> str:
    # sandboxd runs on asyncio (grpc.aio); tests use the same loop.
    return "asyncio"


@pytest.fixture(autouse=True)
async def _stray_grpc_completions_are_not_this_tests(anyio_backend: str) -> AsyncIterator[None]:
    """Each test runs on a fresh event loop, but grpc.aio's completion poller is
    process-wide: an RPC of an earlier test that completes after that test's
    loop closed is handed to the closed loop from inside this one, which
    raises "Event loop is closed" here. That one error belongs to no test and
    is dropped; every other error reaches the test as before.
    """
    loop = asyncio.get_running_loop()
    inner = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if (
            isinstance(error, RuntimeError)
            and str(error) == "Event loop is closed"
            and "PollerCompletionQueue" in repr(context.get("handle"))
        ):
            return
        if inner is None:
            loop.default_exception_handler(context)
        else:
            inner(loop, context)

    loop.set_exception_handler(handler)
    yield


_tier_outcomes: dict[str, dict[str, int]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Count per tier so the summary shows the Docker tier really ran.
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        tier = next((m for m in TIERS if m in report.keywords), "other")
        # An xfail is a documented known gap that ran, not a test that was skipped.
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = "skipped" if report.skipped else report.outcome
        counts = _tier_outcomes.setdefault(tier, {})
        counts[outcome] = counts.get(outcome, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.section("sandboxd test tiers")
    for tier, counts in sorted(_tier_outcomes.items()):
        parts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        terminalreporter.write_line(f"{tier}: {parts}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Under CI a skipped Docker (or Kubernetes) test is a failure: a green run
    # must have run them.
    skipped = sum(
        _tier_outcomes.get(tier, {}).get("skipped", 0) for tier in (*DOCKER_TIERS, "kubernetes")
    )
    if os.environ.get("CI") == "true" and skipped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\nCI=true: {skipped} Docker or Kubernetes test(s) skipped; failing the run")

"""The client's tests on every CPython this machine has, each in a fresh virtualenv.

`make test` runs the whole suite on the development interpreter (.venv).
This runs the client's share of it on each CPython that pyproject.toml
supports and this machine has: the unit tier, the client against in-process
servers, and the conformance suite through the client against a real daemon
on a real engine. Each venv is made anew (uv) with the wheel `make dist`
built and its client extras, plus the server extra where that Python runs
the daemon; then a count per version is printed.

The daemon of the conformance suite runs on the same Python where it
supports it, so on 3.12 and 3.13 it ships executor bytecode whose magic the
container's python3 does not have, and the container compiles the sources
(tests/docker/test_bytecode.py asserts which happened). On an older Python
the daemon runs on the development interpreter (SANDBOXD_TEST_DAEMON_PYTHON).

Tests are collected from this checkout, so in-process code is the source
tree (the same files the wheel carries); console scripts and `python -I`
subprocesses use the installed wheel.

The versions run side by side (SANDBOXD_PYTHONS_JOBS, default 3).

Interpreters: SANDBOXD_PYTHONS (paths, space-separated), or every
$PYENV_ROOT/versions/3.*/bin/python that requires-python admits except the
development interpreter's version: make test's own run (a fresh venv in CI)
ran the whole suite on it, and its count (DEV_REPORT) is printed with the
others. Under CI=true a supported minor version (the classifiers) with no
interpreter here fails the run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".pythons"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: The client's tests: the unit tier (the client, the contract, the executor's
#: tools as the local backend runs them in the client's process), the client
#: against in-process servers, and the conformance cases through the client on
#: a real daemon. The local conformance backend runs with the pure-Python grep
#: engine only (the same tool code, and the part of it that leans on the
#: interpreter's re module). Left to the development interpreter's full run:
#: gVisor (the same client on another runtime), the local backend with
#: ripgrep and with a per-call folder, the pytest plugin's pytester sessions,
#: the generated code's drift check (it needs the dev extra's pinned
#: grpcio-tools) and the import contracts (import-linter, the dev extra's).
SELECTION = [
    "tests/unit",
    "tests/runtime",
    "tests/grpc",
    "tests/ecosystem/test_sandboxctl.py",
    "tests/ecosystem/test_mcp.py",
    "tests/conformance",
    "tests/docker/test_bytecode.py",
]
OPTIONS = [
    "--ignore=tests/unit/test_proto_drift.py",
    # The import contracts are the source's, not the interpreter's (and
    # import-linter needs 3.11): the development interpreter checks them.
    "--ignore=tests/unit/test_architecture.py",
    "-k",
    "not gvisor and not runsc and not local-cwd and (not local- or local-pygrep)",
]

#: Where the daemon does not run (sandboxd.contract.extras.SERVER_PYTHON; the server
#: extra is not installed there): the tests of the daemon's own code, run in
#: this process. The conformance suite's daemon still runs, on a newer Python.
DAEMON_ONLY_PATHS = ["tests/grpc", "tests/docker/test_bytecode.py"]
DAEMON_ONLY = [
    "--ignore=tests/unit/test_channel.py",
    "--ignore=tests/unit/test_pipes.py",
    "--ignore=tests/unit/test_kubernetes_backend.py",
    "--ignore=tests/unit/test_lifetimes.py",
    "--ignore=tests/unit/test_warm_pool.py",
    "--ignore=tests/unit/test_errors.py",
    "--ignore=tests/unit/test_fork_methods.py",
    "--ignore=tests/unit/test_model_parity.py",
    "--ignore=tests/unit/test_runtime_info.py",
    "--ignore=tests/unit/test_egress_gateway.py",
    "--ignore=tests/unit/test_egress_secrets_service.py",
    "--ignore=tests/unit/test_egress_precedence.py",
    # The executor's own code runs anywhere; these two daemons are the daemon's channel.
    "--deselect=tests/unit/test_executor_replicas.py::"
    "test_two_daemons_call_one_server_at_once_and_each_gets_its_answers",
    "--deselect=tests/unit/test_network_policy.py::test_decisions_are_counted_by_verdict",
    "--deselect=tests/unit/test_package_boundary.py::"
    "test_a_local_daemon_without_http_loads_neither_docker_nor_fastapi",
    "--deselect=tests/unit/test_extras.py::test_extra_modules_match_its_requirements[server]",
    "--deselect=tests/unit/test_extras.py::test_extra_modules_match_its_requirements[kubernetes]",
]
#: make test's own run writes its JUnit report here.
DEV_REPORT = WORK / "dev.xml"
CLIENT_EXTRAS = ["agent", "local", "pytest", "mcp", "ctl", "openai", "test"]


def _version(python: Path) -> tuple[int, ...]:
    out = subprocess.run(
        [str(python), "-c", "import sys; print(*sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tuple(int(part) for part in out.split())


def _minimum() -> tuple[int, ...]:
    match = re.fullmatch(r">=\s*(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert match, "requires-python is expected as >=X.Y"
    return int(match.group(1)), int(match.group(2))


def supported_minors() -> list[tuple[int, int]]:
    """The Python versions the classifiers name (3.10, 3.11, ...)."""
    found = []
    for classifier in PYPROJECT["project"]["classifiers"]:
        match = re.fullmatch(r"Programming Language :: Python :: (\d+)\.(\d+)", classifier)
        if match:
            found.append((int(match.group(1)), int(match.group(2))))
    return sorted(found)


def interpreters() -> list[tuple[tuple[int, ...], Path]]:
    named = os.environ.get("SANDBOXD_PYTHONS", "").split()
    if named:
        candidates = [Path(p) for p in named]
    else:
        root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        candidates = sorted((root / "versions").glob("3.*/bin/python"))
    found: dict[tuple[int, ...], tuple[tuple[int, ...], Path]] = {}
    for python in candidates:
        version = _version(python)
        if version[:2] >= _minimum():
            found.setdefault(version[:2], (version, python))  # one per minor version
    return [found[minor] for minor in sorted(found)]


@dataclass
class Outcome:
    version: str
    passed: int
    failed: int
    skipped: int
    seconds: float
    cpu_seconds: float
    tiers: list[str]
    log: Path

    def line(self) -> str:
        timing = ""
        if self.seconds:
            timing = f" in {self.seconds:.0f} s, {self.cpu_seconds:.0f} s of CPU"
        return (
            f"python {self.version}: {self.passed} passed, {self.failed} failed, "
            f"{self.skipped} skipped{timing} ({'; '.join(self.tiers)})"
        )


def _uv(*args: str) -> None:
    uv = Path(sys.executable).parent / "uv"
    subprocess.run([str(uv), *args], check=True, cwd=ROOT)


def prepare(version: tuple[int, ...], python: Path, wheel: Path) -> Path:
    """A fresh venv for ``python`` with the wheel and the extras for this version."""
    from sandboxd.contract.extras import SERVER_PYTHON

    folder = WORK / ".".join(map(str, version[:2]))
    shutil.rmtree(folder, ignore_errors=True)
    _uv("venv", "--quiet", "--python", str(python), str(folder))
    daemon_extras = ["server", "kubernetes"] if version[:2] >= SERVER_PYTHON else []
    extras = [*CLIENT_EXTRAS, *daemon_extras]
    venv_python = folder / "bin" / "python"
    # --compile-bytecode: as pip does, so a first run does not pay for compiling.
    _uv(
        "pip", "install", "--quiet", "--compile-bytecode", "--python", str(venv_python),
        f"{wheel}[{','.join(extras)}]",
    )  # fmt: skip
    return venv_python


def _counts(report: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) of a JUnit report."""
    total = failed = skipped = 0
    for suite in ET.parse(report).getroot().iter("testsuite"):
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def _dev_outcome() -> Outcome:
    passed, failed, skipped = _counts(DEV_REPORT)
    return Outcome(
        version=".".join(map(str, sys.version_info[:3])),
        passed=passed,
        failed=failed,
        skipped=skipped,
        seconds=0.0,
        cpu_seconds=0.0,
        tiers=["the whole suite: make test's own run in .venv"],
        log=DEV_REPORT,
    )


def run(version: tuple[int, ...], venv_python: Path, extra_args: list[str]) -> Outcome:
    from sandboxd.contract.extras import SERVER_PYTHON

    name = ".".join(map(str, version))
    folder = venv_python.parents[1]
    report, log = folder / "junit.xml", folder / "pytest.log"
    env, selection = dict(os.environ), [*SELECTION, *OPTIONS]
    if version[:2] < SERVER_PYTHON:
        env["SANDBOXD_TEST_DAEMON_PYTHON"] = sys.executable  # the daemon needs a newer one
        selection = [p for p in selection if p not in DAEMON_ONLY_PATHS] + DAEMON_ONLY
    # A folder of its own: side by side, pytest's numbered folders in
    # /tmp/pytest-of-USER (it keeps the newest three) would be removed under
    # a run still using them. Short, for the unix sockets made in it.
    basetemp = tempfile.mkdtemp(prefix=f"pytest-py{name}-")
    started = time.monotonic()
    with log.open("w") as out:
        pytest = subprocess.Popen(
            [str(venv_python), "-m", "pytest", "-p", "no:cacheprovider", "-q",
             f"--junitxml={report}", f"--basetemp={basetemp}", *selection, *extra_args],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
        )  # fmt: skip
        # wait4: this run's own CPU (pytest and its daemons; not the
        # containers, which the engine starts), apart from the parallel runs.
        _, _, usage = os.wait4(pytest.pid, 0)
        pytest.returncode = 0
    seconds, cpu = time.monotonic() - started, usage.ru_utime + usage.ru_stime
    shutil.rmtree(basetemp, ignore_errors=True)
    text = log.read_text()
    tiers = re.search(r"=+ sandboxd test tiers =+\n(.*?)(?:\n=|\Z)", text, re.DOTALL)
    passed, failed, skipped = _counts(report) if report.exists() else (0, 1, 0)
    return Outcome(
        version=name,
        passed=passed,
        failed=failed,
        skipped=skipped,
        seconds=seconds,
        cpu_seconds=cpu,
        tiers=tiers.group(1).strip().splitlines() if tiers else [],
        log=log,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help="the wheel to install (default: make dist's)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="more pytest arguments")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import sandboxd

    wheel = args.wheel or ROOT / "dist" / f"sandboxd-{sandboxd.__version__}-py3-none-any.whl"
    if not wheel.is_file():
        print(f"[pythons] no wheel at {wheel}: run `make dist`", file=sys.stderr)
        return 1
    found = interpreters()
    missing = sorted(set(supported_minors()) - {version[:2] for version, _ in found})
    if missing:
        names = ", ".join(f"{major}.{minor}" for major, minor in missing)
        print(f"[pythons] no interpreter here for Python {names}", file=sys.stderr)
        if os.environ.get("CI") == "true":
            return 1
    outcomes = []
    if not os.environ.get("SANDBOXD_PYTHONS"):
        # The development interpreter's version runs the whole suite in make
        # test's own run (a fresh venv in CI), of which this selection is a part.
        here = sys.version_info[:2]
        if any(version[:2] == here for version, _ in found) and DEV_REPORT.exists():
            outcomes.append(_dev_outcome())
        found = [(version, python) for version, python in found if version[:2] != here]

    def one(version: tuple[int, ...], python: Path) -> Outcome:
        print(f"[pythons] {'.'.join(map(str, version))}: fresh venv, wheel, tests", flush=True)
        outcome = run(version, prepare(version, python, wheel), args.pytest_args)
        print(f"[pythons] {outcome.line()}", flush=True)
        if outcome.failed or not outcome.passed:
            print(outcome.log.read_text()[-6000:], file=sys.stderr, flush=True)
        return outcome

    # The runs wait on the engine far more than they compute (about 100 s of
    # CPU in 7-11 minutes each), so they overlap; each has its own venv,
    # namespace and daemons.
    jobs = int(os.environ.get("SANDBOXD_PYTHONS_JOBS", "3"))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        outcomes += list(pool.map(lambda found_one: one(*found_one), found))
    print("[pythons] the client's tests per Python version:")
    for outcome in outcomes:
        print(f"[pythons]   {outcome.line()}")
    return 1 if any(o.failed or not o.passed for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())

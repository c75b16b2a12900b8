"""The packages as they would be published (`make dist`, scripts/dist.sh):
their metadata, the files each carries and nothing else, and the wheel that
the sdist builds. (tests/ecosystem/test_thin_install.py installs the wheel and
uses it against a daemon; tests/unit/test_versions.py keeps one version.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from sandboxd.executor import bundle
from tests.dist import NPM_TARBALL, ROOT, SDIST, VERSION, WHEEL, require_built
from tests.pyproject import PYPROJECT

pytestmark = pytest.mark.timeout(600)

PACKAGES = ("sandboxd", "runtime_client")
LICENCE_FILES = ("LICENSE", "NOTICE")


def _package_files() -> dict[str, bytes]:
    """What the wheel must carry of the source tree: every module, stub and
    marker of the two packages, as they are here."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix in (".py", ".pyi") or path.name == "py.typed":
                found[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    return found


def _wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.fixture(scope="module")
def wheel_files() -> dict[str, bytes]:
    require_built(WHEEL)
    return _wheel_files(WHEEL)


def test_the_wheel_carries_the_packages_as_they_are_and_nothing_else(
    wheel_files: dict[str, bytes],
) -> None:
    info = f"sandboxd-{VERSION}.dist-info"
    sources = {name: data for name, data in wheel_files.items() if not name.startswith(info)}
    expected = _package_files()
    both = expected.keys() & sources.keys()
    stale = sorted(name for name in both if sources[name] != expected[name])
    assert (sorted(expected.keys() - sources.keys()), stale) == ([], []), (
        "dist/ is older than the sources or leaves files out: run `make dist`"
    )
    assert sorted(sources.keys() - expected.keys()) == []
    assert {name.removeprefix(f"{info}/") for name in wheel_files if name.startswith(info)} == {
        "METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt",
        *(f"licenses/{name}" for name in LICENCE_FILES),
    }  # fmt: skip
    for name in LICENCE_FILES:
        assert wheel_files[f"{info}/licenses/{name}"] == (ROOT / name).read_bytes()


def test_the_wheel_carries_the_generated_code_and_the_executor_bundle(
    wheel_files: dict[str, bytes],
) -> None:
    for generated in ("sandbox_pb2.py", "sandbox_pb2_grpc.py", "sandbox_pb2.pyi"):
        assert f"sandboxd/contract/v1/{generated}" in wheel_files
    # Every module the daemon ships into a container, from the wheel's own copy.
    shipped = json.loads(bundle.bundle_blob(bytecode=False))
    for module, (is_package, source) in shipped.items():
        if module == "sandboxd":
            continue  # a namespace inside the container (bundle._bundle)
        path = module.replace(".", "/") + ("/__init__.py" if is_package else ".py")
        assert wheel_files[path].decode() == source, path
    assert "sandboxd/executor/tools/__init__.py" in wheel_files


def _metadata(wheel_files: dict[str, bytes]) -> dict[str, list[str]]:
    message = Parser().parsestr(wheel_files[f"sandboxd-{VERSION}.dist-info/METADATA"].decode())
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    fields["description"] = [message.get_payload()]
    return fields


def test_the_metadata_says_what_pyproject_says(wheel_files: dict[str, bytes]) -> None:
    project = PYPROJECT["project"]
    meta = _metadata(wheel_files)
    assert meta["Name"] == ["sandboxd"]
    assert meta["Version"] == [VERSION]
    assert meta["Requires-Python"] == [project["requires-python"]]
    assert meta["License-Expression"] == ["Apache-2.0"]
    assert sorted(meta["License-File"]) == sorted(LICENCE_FILES)
    assert meta["Classifier"] == project["classifiers"]
    assert sorted(meta["Provides-Extra"]) == sorted(project["optional-dependencies"])
    base = sorted(str(Requirement(r)) for r in meta["Requires-Dist"] if "extra ==" not in r)
    assert base == sorted(str(Requirement(d)) for d in project["dependencies"])
    assert meta["Description-Content-Type"] == ["text/markdown"]
    assert meta["description"][0].strip() == (ROOT / "README.md").read_text().strip()


def test_twine_finds_the_packages_fit_to_publish() -> None:
    # The long description renders, the metadata is complete (twine check --strict).
    require_built(WHEEL, SDIST)
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(WHEEL), str(SDIST)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_sdist_holds_the_sources_and_builds_the_same_wheel(
    wheel_files: dict[str, bytes], tmp_path: Path
) -> None:
    require_built(SDIST)
    top = f"sandboxd-{VERSION}"
    with tarfile.open(SDIST) as archive:
        names = {m.name.removeprefix(f"{top}/") for m in archive.getmembers() if m.isfile()}
        archive.extractall(tmp_path, filter="data")
    egg_info = {name for name in names if name.startswith("sandboxd.egg-info/")}
    assert names - egg_info == {
        "PKG-INFO", "setup.cfg", "pyproject.toml", "README.md", *LICENCE_FILES,
        *_package_files(),
    }  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "build", "--installer", "uv", "--wheel", "--outdir",
         str(tmp_path / "out"), str(tmp_path / top)],
        check=True, capture_output=True,
    )  # fmt: skip
    rebuilt = _wheel_files(tmp_path / "out" / WHEEL.name)
    assert sorted(rebuilt) == sorted(wheel_files)
    assert [name for name in sorted(rebuilt) if rebuilt[name] != wheel_files[name]] == []


def _typescript_sources() -> list[str]:
    src = ROOT / "clients" / "typescript" / "src"
    return [p.relative_to(src).with_suffix("").as_posix() for p in sorted(src.rglob("*.ts"))]


def test_the_npm_tarball_holds_the_build_the_proto_and_the_licence_only() -> None:
    require_built(NPM_TARBALL)
    package = ROOT / "clients" / "typescript"
    with tarfile.open(NPM_TARBALL) as archive:
        files = {m.name.removeprefix("package/"): m for m in archive.getmembers() if m.isfile()}
        read = {name: archive.extractfile(member).read() for name, member in files.items()}  # type: ignore[union-attr]
    proto = "proto/sandboxd/v1/sandbox.proto"
    built = {
        f"dist/src/{name}{suffix}"
        for name in _typescript_sources()
        for suffix in (".js", ".js.map", ".d.ts")
    }
    assert set(files) == {"package.json", "README.md", *LICENCE_FILES, proto, *built}
    assert read[proto] == (ROOT / proto).read_bytes()
    assert read["README.md"] == (package / "README.md").read_bytes()
    for name in LICENCE_FILES:
        assert read[name] == (ROOT / name).read_bytes()
    assert json.loads(read["package.json"])["version"] == VERSION
    # The sources are not shipped, so the maps carry them.
    source_map = json.loads(read["dist/src/index.js.map"])
    assert source_map["sourcesContent"] == [(package / "src" / "index.ts").read_text()]

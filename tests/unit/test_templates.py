"""What a template build may not do, refused before the engine sees it
(backends/docker/templates.check). Each case was seen to pass through with its
check removed (the build would then mount, pull or fetch)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from sandboxd.backends.docker import templates
from sandboxd.contract.errors import InvalidArgument

pytestmark = pytest.mark.unit

LOCAL = {"sandboxd-workspace:latest", "tools:1"}


def _check(text: str, network: bool = False) -> list[str]:
    return templates.check(text, network=network, local=LOCAL.__contains__)


def test_a_plain_build_passes_and_names_its_bases() -> None:
    text = (
        "# syntax=docker/dockerfile:1\nFROM sandboxd-workspace:latest AS base\n"
        "RUN echo a \\\n  && echo b\nFROM base\nCOPY --from=tools:1 /x /x\n"
        "COPY --from=base /y /y\nADD local.tar /z\n"
    )
    assert _check(text) == ["sandboxd-workspace:latest", "tools:1"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # A host path, the engine's socket, a secret or an ssh agent in a RUN.
        ("FROM tools:1\nRUN --mount=type=bind,source=/,target=/host cat /host/etc/shadow",
         "--mount is refused: a template build mounts nothing of the host"),
        ("FROM tools:1\nRUN --mount=type=secret,id=x cat /run/secrets/x", "--mount is refused"),
        ("FROM tools:1\nRUN --network=host curl x", "--network is refused"),
        ("FROM tools:1\nRUN  --security=insecure id", "--security is refused"),
        # Nothing is pulled.
        ("FROM alpine:3\nRUN id", "image 'alpine:3' is not in the local Docker engine"),
        ("FROM tools:1\nCOPY --from=busybox /bin/sh /sh", "'busybox' is not in the local"),
        ("FROM $BASE\nRUN id", "is not resolved from build arguments"),
        # ADD of a URL is fetched by the engine itself.
        ("FROM tools:1\nADD https://example.com/x.tgz /x", "ADD of a URL fetches from the net"),
        ("RUN id\n", "the Dockerfile has no FROM"),
    ],
)  # fmt: skip
def test_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidArgument, match=reason.replace("(", r"\(").replace("$", r"\$")):
        _check(text)


def test_add_of_a_url_passes_where_the_operator_allows_the_network() -> None:
    assert _check("FROM tools:1\nADD https://example.com/x.tgz /x", network=True) == ["tools:1"]


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_the_dockerfile_is_read_from_the_context_and_the_digest_follows_content(
    tmp_path: Path,
) -> None:
    context = tmp_path / "c.tar"
    context.write_bytes(_tar({"Dockerfile": b"FROM tools:1\n", "a": b"1"}))
    assert templates.dockerfile_of(context, "Dockerfile") == "FROM tools:1\n"
    with pytest.raises(InvalidArgument, match="has no 'other'"):
        templates.dockerfile_of(context, "other")
    first = templates.digest(context, "Dockerfile", False, ["sha256:1"])
    assert first == templates.digest(context, "Dockerfile", False, ["sha256:1"])
    assert first != templates.digest(context, "Dockerfile", True, ["sha256:1"])
    assert first != templates.digest(context, "Dockerfile", False, ["sha256:2"])  # base rebuilt
    context.write_bytes(_tar({"Dockerfile": b"FROM tools:1\n", "a": b"2"}))
    assert first != templates.digest(context, "Dockerfile", False, ["sha256:1"])
    (tmp_path / "bad.tar").write_bytes(b"not a tar at all" * 100)
    with pytest.raises(InvalidArgument, match="not a tar stream"):
        templates.dockerfile_of(tmp_path / "bad.tar", "Dockerfile")


def test_a_build_counts_as_its_own_only_the_images_its_steps_committed() -> None:
    """Build._note: a cached step's image (another build's) and the base are
    not this build's to remove; a committed one is."""
    build = templates.Build(client=None)  # type: ignore[arg-type]
    log = [
        "Step 1/4 : FROM sandboxd-workspace:latest",
        " ---> dbcc74723cf3",
        "Step 2/4 : RUN echo cached",
        " ---> Using cache",
        " ---> 4d055e677a8e",
        "Step 3/4 : RUN make",
        " ---> Running in 7018f1cbc2e2",
        "built",
        "Removing intermediate container 7018f1cbc2e2",
        " ---> 923ec752a5ed",
        "Step 4/4 : RUN sleep 60",
        " ---> Running in a47f9f457df3",
    ]
    for line in log:
        build._note(line)
    assert build.committed == ["923ec752a5ed"]
    assert build.containers == ["7018f1cbc2e2", "a47f9f457df3"]


def test_an_image_creation_time_is_read_with_nanoseconds() -> None:
    created = templates._created({"Created": "2026-12-02T15:15:36.614491545Z"})
    assert created == pytest.approx(1796224536.614491, abs=1e-3)
    assert templates._created({"Created": "garbage"}) == 0.0

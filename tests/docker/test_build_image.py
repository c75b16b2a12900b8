"""scripts/build-image.sh keeps an image in step with its folder: the label is
the content hash, an unchanged folder builds nothing, a changed one rebuilds
and drops the image it replaced; and the image the tests run is the one
images/workspace describes."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from tests.docker_fixtures import IMAGE, RUN_PREFIX

pytestmark = [pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build-image.sh"
HASH_LABEL = "sandboxd.image.hash"

# A context that builds in seconds on whatever base the script picks.
_DOCKERFILE = "ARG BASE=debian:bookworm-slim\nFROM ${BASE}\nCOPY note.txt /note.txt\n"


def _build(tag: str, context: Path) -> str:
    done = subprocess.run(
        [str(SCRIPT), tag, str(context)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def _hash(context: Path) -> str:
    done = subprocess.run(
        [str(SCRIPT), "--hash", str(context)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


@pytest.fixture
def scratch_tag(docker_client: docker.DockerClient) -> Iterator[str]:
    tag = f"sandboxd-test-build:{RUN_PREFIX}"
    yield tag
    if _exists(docker_client, tag):
        docker_client.images.remove(tag)


def test_the_label_follows_the_folder_and_a_rebuild_drops_the_old_image(
    docker_client: docker.DockerClient, scratch_tag: str, tmp_path: Path
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(_DOCKERFILE)
    (context / "note.txt").write_text("first\n")
    first_hash = _hash(context)

    _build(scratch_tag, context)
    first = docker_client.images.get(scratch_tag)
    assert first.labels[HASH_LABEL] == first_hash
    assert first.labels["sandboxd.managed"] == "true"

    said = _build(scratch_tag, context)
    assert "up to date" in said
    assert docker_client.images.get(scratch_tag).id == first.id

    (context / "note.txt").write_text("second\n")
    second_hash = _hash(context)
    assert second_hash != first_hash
    said = _build(scratch_tag, context)
    assert "rebuilding" in said
    second = docker_client.images.get(scratch_tag)
    assert second.id != first.id and second.labels[HASH_LABEL] == second_hash
    assert not _exists(docker_client, first.id), "the replaced image was left behind"

    # A new file counts as much as a changed one; the hash is of the content
    # alone (back to the first content, back to the first hash).
    (context / "extra").write_text("x")
    assert _hash(context) not in (first_hash, second_hash)
    (context / "extra").unlink()
    (context / "note.txt").write_text("first\n")
    assert _hash(context) == first_hash


def test_the_image_under_test_is_what_images_workspace_describes(
    docker_client: docker.DockerClient,
) -> None:
    label = docker_client.images.get(IMAGE).labels.get(HASH_LABEL)
    wanted = _hash(ROOT / "images" / "workspace")
    assert label == wanted, f"{IMAGE} is stale: run `make image`"

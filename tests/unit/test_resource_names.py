"""Issue 23 item 4: a resource name stands for one (namespace, instance) pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxd.backends.docker import disk
from sandboxd.backends.shared import labels
from sandboxd.contract.errors import SandboxUnavailable

pytestmark = pytest.mark.unit


def test_namespace_and_instance_joined_by_a_dash_no_longer_meet() -> None:
    assert labels.resource_name("a", "b-c") != labels.resource_name("a-b", "c")
    pairs = [(ns, i) for ns in ("a", "a-b", "a-b-c") for i in ("c", "b-c", "_x", "c_d", "x.y")]
    names = {labels.resource_name(ns, i) for ns, i in pairs if i[:1].isalnum()}
    assert len(names) == len([p for p in pairs if p[1][:1].isalnum()])


def test_a_name_reads_back_only_for_its_own_namespace() -> None:
    name = labels.resource_name("a-b", "c")
    assert labels.instance_from_name("a-b", name) == "c"
    assert labels.instance_from_name("a", name) is None
    assert labels.instance_from_name("a-b", "/" + name) == "c"
    assert labels.instance_from_name("a", labels.pool_name("a")) is None


def test_the_old_names_read_back_for_their_creator() -> None:
    assert labels.legacy_instance_from_name("a", "sandboxd-a-b-c") == "b-c"
    assert labels.legacy_instance_from_name("a", "sandboxd-a--pool-00ff") is None
    assert labels.legacy_instance_from_name("a", labels.resource_name("a", "x")) is None


def test_a_disk_image_in_use_is_never_written_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = tmp_path / "sandboxd-a_b.img"
    image.write_bytes(b"someone's data")
    monkeypatch.setattr(disk, "_attached", lambda path: True)
    with pytest.raises(SandboxUnavailable, match="already exists and is in use"):
        disk._claim(tmp_path, "sandboxd-a_b")
    assert image.read_bytes() == b"someone's data"
    # A leftover nothing holds is replaced by a fresh, empty file.
    monkeypatch.setattr(disk, "_attached", lambda path: False)
    assert disk._claim(tmp_path, "sandboxd-a_b") == image
    assert image.read_bytes() == b""

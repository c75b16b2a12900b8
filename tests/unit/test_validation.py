"""Request checks and option rules: what each bad value gets."""

from __future__ import annotations

import pytest

from sandboxd.backends.shared.options import check_same, effective
from sandboxd.contract import validation
from sandboxd.contract.errors import AlreadyExists, InvalidArgument
from sandboxd.contract.models import NetworkPolicy, Runtime, SandboxOptions
from sandboxd.daemon.settings import Settings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("good", ["a", "A9", "agent-42", "x.y_z", "a" * 128])
def test_valid_instance_ids(good: str) -> None:
    assert validation.instance_id(good) == good


@pytest.mark.parametrize("bad", ["", "-a", ".a", "a b", "a/b", "a" * 129, "é", "a\x00"])
def test_invalid_instance_ids_are_rejected_with_the_rule(bad: str) -> None:
    with pytest.raises(InvalidArgument, match=r"invalid instance id .*1-128 characters"):
        validation.instance_id(bad)


@pytest.mark.parametrize(
    ("bad", "message"),
    [("", "must not be empty"), ("a\x00b", "NUL byte"), ("x" * 5000, "longer than 4096")],
)
def test_invalid_paths(bad: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        validation.path(bad)


def test_defaults_are_filled_from_settings() -> None:
    settings = Settings(image="img:1", memory_bytes=64 << 20, cpus=0.5, pids_limit=64)
    options = effective(SandboxOptions(), settings)
    assert options.image == "img:1"
    assert options.memory_bytes == 64 << 20
    assert options.cpus == 0.5
    assert options.pids_limit == 64
    assert options.workdir == "/workspace"
    assert options.runtime is Runtime.RUNC
    assert options.network == NetworkPolicy()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (SandboxOptions(memory_bytes=1000), "memory_bytes must be at least"),
        (SandboxOptions(memory_bytes=-1), "memory_bytes must be at least"),
        (SandboxOptions(cpus=-1), "cpus must be a finite number, not negative"),
        (SandboxOptions(pids_limit=3), "pids_limit must be at least 16"),
        (SandboxOptions(workdir="/etc"), "workdir must be /workspace"),
        (SandboxOptions(workdir="/workspace/../etc"), "workdir must be /workspace"),
        (SandboxOptions(env={"1BAD": "x"}), "invalid variable name"),
        (SandboxOptions(env={"OK": "a\x00"}), "NUL"),
        (SandboxOptions(labels={"bad key": "x"}), "invalid key"),
        (SandboxOptions(labels={"k": "v" * 300}), "at most 256"),
    ],
)
def test_bad_options_are_rejected(options: SandboxOptions, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        effective(options, Settings())


def test_same_id_with_default_options_is_idempotent() -> None:
    existing = effective(SandboxOptions(memory_bytes=64 << 20), Settings())
    check_same("a", SandboxOptions(), existing)
    check_same("a", SandboxOptions(memory_bytes=64 << 20), existing)


def test_explicit_false_flag_differs_from_an_existing_true() -> None:
    existing = effective(SandboxOptions(network=True), Settings())
    check_same("a", SandboxOptions(), existing)
    with pytest.raises(AlreadyExists, match="different network"):
        check_same("a", SandboxOptions(network=False), existing)


def test_same_id_with_different_options_names_the_fields() -> None:
    existing = effective(SandboxOptions(), Settings())
    with pytest.raises(AlreadyExists, match="different memory_bytes, network"):
        check_same("a", SandboxOptions(memory_bytes=32 << 20, network=True), existing)


@pytest.mark.parametrize("size", [1, (16 << 20) - 1])
def test_a_disk_too_small_for_ext4_is_refused_at_configuration(size: int) -> None:
    from pydantic import ValidationError

    from sandboxd.backends.shared.settings import DEFAULT_DISK_BYTES
    from sandboxd.daemon.settings import Settings

    with pytest.raises(ValidationError, match="disk_bytes must be 0"):
        Settings.from_arguments(disk_bytes=size)
    assert Settings.from_arguments(disk_bytes=0).disk_bytes == 0  # no limit, on purpose
    assert Settings.from_arguments().disk_bytes == DEFAULT_DISK_BYTES == 4 << 30
    assert Settings.from_arguments(disk_bytes=16 << 20).disk_bytes == 16 << 20

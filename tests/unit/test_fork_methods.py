"""The fork methods are named once (models.FORK_METHODS); every surface says the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandboxd.contract.models import FORK_METHODS
from sandboxd.transports.http.routes.transfer import ForkSandboxResponse

pytestmark = [pytest.mark.unit]

ROOT = Path(__file__).resolve().parents[2]


def test_the_proto_comment_lists_the_methods() -> None:
    proto = (ROOT / "proto/sandboxd/v1/sandbox.proto").read_text()
    block = proto[proto.index("message ForkSandboxResponse") :]
    comment = re.search(r"string method = 2;\s*//\s*(.*)", block)
    assert comment is not None
    assert tuple(m.strip() for m in comment.group(1).split("|")) == FORK_METHODS


def test_the_http_schema_lists_the_methods() -> None:
    described = ForkSandboxResponse.model_fields["method"].description or ""
    assert tuple(m.strip() for m in described.split("|")) == FORK_METHODS


def test_the_backends_report_only_known_methods() -> None:
    sources = [
        ROOT / "sandboxd/backends/shared/clone.py",
        ROOT / "sandboxd/backends/docker/disk.py",
    ]
    reported = {
        m
        for path in sources
        for m in re.findall(r'"((?:image-)?(?:reflink|copy))"', path.read_text())
    }
    assert reported and reported <= set(FORK_METHODS)

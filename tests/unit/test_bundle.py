"""The executor bootstrapped from its bundle, over real pipes, as in a container."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from sandboxd.executor import bundle, wire

pytestmark = pytest.mark.unit


def test_bootstrapped_executor_serves_requests_and_survives_garbage(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        bundle.bootstrap_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(bundle.bundle_payload())
    proc.stdin.write(b"{torn frame from a dead daemon\n")
    proc.stdin.write(b"[]\n")
    proc.stdin.write(wire.encode({"id": 1, "op": "hello", "args": {}}))
    proc.stdin.write(
        wire.encode(
            {"id": 2, "op": "write_file", "args": {"path": "f", "data_base64": wire.b64(b"hi")}}
        )
    )
    proc.stdin.flush()
    replies = {}
    for _ in range(2):
        reply = json.loads(proc.stdout.readline())
        replies[reply["id"]] = reply
    assert replies[1]["ok"]["bundle"] == bundle.bundle_id()
    assert replies[2]["ok"]["created"] is True
    assert (tmp_path / "f").read_bytes() == b"hi"
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    assert proc.stderr is not None
    assert b"dropped a malformed frame" in proc.stderr.read()


def test_bundle_id_is_stable_and_covers_the_executor() -> None:
    assert bundle.bundle_id() == bundle.bundle_id()
    blob = bundle.bundle_payload().split(b"\n", 1)[1]
    modules = json.loads(blob)
    assert {"sandboxd.errors", "sandboxd.executor.main", "sandboxd.executor.files"} <= set(modules)

"""The committed generated code must be exactly what `make proto` produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("sandbox_pb2.py", "sandbox_pb2_grpc.py", "sandbox_pb2.pyi")


def test_generated_code_matches_proto(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            str(ROOT / "proto"),
            f"--python_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            str(ROOT / "proto/sandboxd/v1/sandbox.proto"),
        ],
        check=True,
    )
    for name in GENERATED:
        fresh = (tmp_path / "sandboxd/v1" / name).read_text()
        committed = (ROOT / "sandboxd/v1" / name).read_text()
        assert fresh == committed, f"sandboxd/v1/{name} drifted from proto/: run `make proto`"

"""The committed generated code must be exactly what `make proto` produces."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts/gen_proto.py")
assert _spec is not None and _spec.loader is not None
gen_proto = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_proto)


def test_generated_code_matches_proto(tmp_path: Path) -> None:
    gen_proto.generate(tmp_path)
    for name in gen_proto.GENERATED:
        fresh = (tmp_path / name).read_text()
        committed = (ROOT / "sandboxd/contract/v1" / name).read_text()
        assert fresh == committed, (
            f"sandboxd/contract/v1/{name} drifted from proto/: run `make proto`"
        )


def test_the_proto_names_stay_those_other_languages_load() -> None:
    # Only Python module paths move: the descriptor keeps its file name and
    # proto package, which clients in other languages and reflection see.
    from sandboxd.contract.v1 import sandbox_pb2

    assert sandbox_pb2.DESCRIPTOR.name == "sandboxd/v1/sandbox.proto"
    assert sandbox_pb2.DESCRIPTOR.package == "sandboxd.v1"
    assert sandbox_pb2.CreateSandboxRequest.__module__ == "sandboxd.contract.v1.sandbox_pb2"

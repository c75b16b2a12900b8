"""Generate sandboxd/contract/v1/*_pb2*.py from proto/sandboxd/v1/sandbox.proto.

    python scripts/gen_proto.py [OUT_DIR]      (`make proto`; default sandboxd/contract/v1)

The proto file stays where every language loads it, ``proto/sandboxd/v1``,
under its proto package ``sandboxd.v1``: protoc runs with ``-I proto``, so
the descriptor keeps the name ``sandboxd/v1/sandbox.proto`` that other protos
import and reflection clients see. protoc's Python plugin can only place
modules where the file's path says (``sandboxd/v1``), and the generated code
belongs to the contract package, so this step moves the modules there and
rewrites the Python module paths in them (``sandboxd.v1.sandbox_pb2`` ->
``sandboxd.contract.v1.sandbox_pb2``); the proto names (``sandboxd.v1.X``)
and the serialized descriptor are left as protoc wrote them.
tests/unit/test_proto_drift.py runs it and compares with the committed files.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO = ROOT / "proto/sandboxd/v1/sandbox.proto"
DEFAULT_OUT = ROOT / "sandboxd/contract/v1"
GENERATED = ("sandbox_pb2.py", "sandbox_pb2_grpc.py", "sandbox_pb2.pyi")

# Python module paths only: followed by a module name (``sandbox_pb2``) or
# preceded by ``from``; never the proto package in names like sandboxd.v1.Runtime.
_MODULE_PATHS = (
    (re.compile(r"\bsandboxd([./])v1\1(sandbox_pb2\w*)"), r"sandboxd\1contract\1v1\1\2"),
    (re.compile(r"\bfrom sandboxd\.v1 import\b"), "from sandboxd.contract.v1 import"),
)


def _relocate(source: str) -> str:
    for pattern, replacement in _MODULE_PATHS:
        source = pattern.sub(replacement, source)
    return source


def generate(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                "-I",
                str(ROOT / "proto"),
                f"--python_out={tmp}",
                f"--grpc_python_out={tmp}",
                f"--pyi_out={tmp}",
                str(PROTO),
            ],
            check=True,
        )
        out.mkdir(parents=True, exist_ok=True)
        for name in GENERATED:
            text = (Path(tmp) / "sandboxd/v1" / name).read_text()
            (out / name).write_text(_relocate(text))


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT)

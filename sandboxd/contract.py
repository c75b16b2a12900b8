"""The contract layer: what a client and the daemon share, and nothing else.

These modules depend only on the standard library, grpcio and protobuf, so
``pip install sandboxd`` (no extras) is enough for ``runtime_client``'s gRPC
client. tests/unit/test_package_boundary.py imports each of them, and
``runtime_client``, in a fresh interpreter and fails on anything else loaded.
"""

from __future__ import annotations

CONTRACT_MODULES: tuple[str, ...] = (
    "sandboxd",
    "sandboxd.contract",
    "sandboxd.extras",
    "sandboxd.models",
    "sandboxd.errors",
    "sandboxd.v1",
    "sandboxd.v1.sandbox_pb2",
    "sandboxd.v1.sandbox_pb2_grpc",
    "sandboxd.grpc",
    "sandboxd.grpc.convert",
    "sandboxd.grpc.batch",
    # Safe tar extraction, stdlib only: the executor's for uploads, the
    # client's for downloads (both sides take a stream from across a trust line).
    "sandboxd.executor",
    "sandboxd.executor.untar",
)

# Top-level distributions' modules the contract may load besides the standard library.
CONTRACT_DEPENDENCIES: tuple[str, ...] = ("grpc", "google")

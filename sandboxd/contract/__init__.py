"""The contract: what a client needs and the daemon shares, and nothing else.

Models, the error tree, the generated gRPC code (``v1``), proto <-> model
conversion, ToolCalls batch limits, the tools' specs, the safe tar reader and
the extras table. Standard library, grpcio and protobuf only, and nothing
else of sandboxd: ``pip install sandboxd`` (no extras) is enough for
``runtime_client``'s gRPC client. tests/unit/test_package_boundary.py imports
every module of this package in a fresh interpreter and fails on anything
else loaded; pyproject.toml's import-linter contracts keep it a leaf.
"""

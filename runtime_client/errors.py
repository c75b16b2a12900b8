"""The client's errors: the very classes sandboxd raises (``sandboxd.contract.errors``).

A ``GrpcSandboxFactory`` sandbox raises them from status codes (mapped in
``runtime_client._status`` alone); a ``LocalSandboxFactory`` sandbox raises
them directly. Either way ``except NotFound`` means the same thing.
"""

from sandboxd.contract.errors import (
    AlreadyExists,
    Conflict,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    SandboxdError,
    SandboxUnavailable,
    Timeout,
    Unauthenticated,
)

__all__ = [
    "AlreadyExists",
    "Conflict",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "SandboxUnavailable",
    "SandboxdError",
    "Timeout",
    "Unauthenticated",
]

"""The one error tree of sandboxd.

Standard-library only: the executor inside each workspace container raises
these too, and they cross the executor channel by ``kind``. The gRPC server
maps them to status codes in one place (``sandboxd.transports.grpc.status``) and
runtime_client maps the codes back to these same classes, so a caller sees
the same exception whatever the backend::

    SandboxdError
     ├── InvalidArgument      bad request: malformed id, path, range, option
     ├── NotFound             no such instance / file
     ├── AlreadyExists        id taken with different options, path exists
     ├── Conflict             compare-and-swap lost (expected hash differs)
     ├── Unauthenticated      no valid bearer token on a TCP call
     ├── PermissionDenied     the caller or the sandbox user may not do it
     ├── ResourceExhausted    a configured limit was hit (payload, output)
     ├── Timeout              the operation ran out of time
     ├── SandboxUnavailable   the workspace or the engine cannot serve now
     └── Internal             a bug: never expected, always logged
"""

from __future__ import annotations

__all__ = [
    "AlreadyExists",
    "Conflict",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "QuotaExceeded",
    "ResourceExhausted",
    "SandboxUnavailable",
    "SandboxdError",
    "Timeout",
    "Unauthenticated",
    "error_from_kind",
]


class SandboxdError(Exception):
    """Base of every error sandboxd raises on purpose."""

    kind = "internal"
    #: Name of the grpc.StatusCode this error travels as (kept as a string so
    #: this module stays importable inside the container without grpc).
    status_name = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidArgument(SandboxdError):
    kind = "invalid_argument"
    status_name = "INVALID_ARGUMENT"


class NotFound(SandboxdError):
    kind = "not_found"
    status_name = "NOT_FOUND"


class AlreadyExists(SandboxdError):
    kind = "already_exists"
    status_name = "ALREADY_EXISTS"


class Conflict(SandboxdError):
    kind = "conflict"
    status_name = "FAILED_PRECONDITION"


class PermissionDenied(SandboxdError):
    kind = "permission_denied"
    status_name = "PERMISSION_DENIED"


class Unauthenticated(SandboxdError):
    kind = "unauthenticated"
    status_name = "UNAUTHENTICATED"


class ResourceExhausted(SandboxdError):
    kind = "resource_exhausted"
    status_name = "RESOURCE_EXHAUSTED"


class QuotaExceeded(ResourceExhausted):
    """A tenant's quota (service/quotas.py): RESOURCE_EXHAUSTED on the wire, so
    clients see ``ResourceExhausted``; HTTP answers it 429, not a size's 413."""


class Timeout(SandboxdError):
    kind = "timeout"
    status_name = "DEADLINE_EXCEEDED"


class SandboxUnavailable(SandboxdError):
    kind = "unavailable"
    status_name = "UNAVAILABLE"


class Internal(SandboxdError):
    kind = "internal"
    status_name = "INTERNAL"


ERROR_CLASSES: tuple[type[SandboxdError], ...] = (
    InvalidArgument,
    NotFound,
    AlreadyExists,
    Conflict,
    PermissionDenied,
    Unauthenticated,
    ResourceExhausted,
    Timeout,
    SandboxUnavailable,
    Internal,
)

_BY_KIND = {cls.kind: cls for cls in ERROR_CLASSES}


def error_from_kind(kind: str, message: str) -> SandboxdError:
    """Rebuild an error that crossed a boundary as ``(kind, message)``."""
    return _BY_KIND.get(kind, Internal)(message)

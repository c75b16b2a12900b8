"""The error responses each route documents in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from sandboxd.transports.http.schemas import ErrorBody

_MEANING = {
    400: "invalid argument",
    401: "no valid bearer token",
    403: "instance id outside the token's scope",
    404: "no such instance, file or route",
    409: "instance exists with different options",
    412: "precondition failed (expected_sha256 differs)",
    413: "over a size limit",
    429: "over the tenant's quota (the message names it, its limit and the use)",
    500: "internal error (a bug; the log has an incident id)",
    503: "workspace or engine unavailable, or the daemon is shutting down",
    504: "timed out",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    common = (400, 401, 403, 413, 500, 503, 504)
    return {
        status: {"model": ErrorBody, "description": _MEANING[status]}
        for status in sorted({*common, *statuses})
    }

"""What FastAPI cannot derive for the OpenAPI document.

- Validation failures are 400 INVALID_ARGUMENT with the common error body
  (``sandboxd.transports.http.errors``), not FastAPI's 422, so the 422 entries go.
- The NDJSON lines of ``/exec/stream`` (and a process's output, a template's
  build) are not a response model, so their
  schema is added to the components, and the placeholder JSON content FastAPI
  gives every route is taken off that one response.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from sandboxd.transports.http.routes.templates import TemplateEvent
from sandboxd.transports.http.schemas import ExecStreamEvent, ProcessOutputEvent

PROCESS_OUTPUT_PATH = "/v1/sandboxes/{instance_id}/processes/{handle}/output"
STREAM_PATH = "/v1/sandboxes/{instance_id}/exec/stream"


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schemas = document["components"]["schemas"]
            # NDJSON streams: one schema per line, documented by hand.
            for model, path, method in (
                (ExecStreamEvent, STREAM_PATH, "post"),
                (ProcessOutputEvent, PROCESS_OUTPUT_PATH, "get"),
                (TemplateEvent, "/v1/templates", "put"),
                (TemplateEvent, "/v1/snapshots/{name}/template", "post"),
            ):
                event = model.model_json_schema(ref_template="#/components/schemas/{model}")
                schemas.update(event.pop("$defs", {}))
                schemas[model.__name__] = event
                ok = document["paths"][path][method]["responses"]["200"]
                ok["content"].pop("application/json", None)
            for item in document["paths"].values():
                for operation in item.values():
                    operation.get("responses", {}).pop("422", None)
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

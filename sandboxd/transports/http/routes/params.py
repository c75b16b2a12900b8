"""Parameters shared by the routes.

The instance id's pattern is published in the schema but not enforced by
FastAPI: the service checks it, so the message matches gRPC's word for word.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from sandboxd.transports.http.schemas import INSTANCE_ID_SCHEMA

InstanceId = Annotated[
    str, Path(description="names one workspace", json_schema_extra=INSTANCE_ID_SCHEMA)
]
FilePath = Annotated[str, Query(description="absolute, or relative to the workdir")]

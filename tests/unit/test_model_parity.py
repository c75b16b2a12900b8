"""One field list per shape: the models (sandboxd.contract.models) against the proto's
descriptors and the HTTP API's JSON schemas. A field added on one side only
fails here; each shape also survives a round trip through convert.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from sandboxd.contract import convert, models, secrets
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.executor.wire import BASE64_SUFFIX
from sandboxd.transports.http import schemas
from sandboxd.transports.http.routes import snapshots as snapshot_routes
from sandboxd.transports.http.routes import templates as template_routes

# model, message, {model field: proto field} where the names differ, proto-only fields.
PROTO_PAIRS: list[tuple[type, Any, dict[str, str], set[str]]] = [
    (models.SandboxOptions, pb.SandboxOptions, {}, set()),
    (secrets.Secret, pb.Secret, {}, set()),
    # warnings: derived from the options (a property), written into the message.
    (models.SandboxInfo, pb.SandboxInfo, {}, {"warnings"}),
    (models.NetworkPolicy, pb.NetworkPolicy, {}, set()),
    (models.NetworkDecision, pb.NetworkDecision, {}, set()),
    (models.FileInfo, pb.FileInfo, {}, set()),
    (models.ReadFileResult, pb.ReadFileResponse, {}, set()),
    (models.WriteFileResult, pb.WriteFileResponse, {}, set()),
    (models.ExistsResult, pb.ExistsResponse, {}, set()),
    (models.ExecRequest, pb.ExecRequest, {}, {"instance_id"}),
    (models.ExecResult, pb.ExecResponse, {}, set()),
    (models.ExecExit, pb.ExecExit, {}, set()),
    (models.PoolStatus, pb.PoolStatus, {}, set()),
    (models.ServerStatus, pb.GetStatusResponse, {}, set()),
    (models.SandboxToolResult, pb.CallToolResponse, {"fields": "fields_json"}, set()),
    (models.ToolDescription, pb.ToolDescription, {"input_schema": "input_schema_json"}, set()),
    (models.DownloadDone, pb.DownloadDone, {}, set()),
    (models.TreeUploadResult, pb.UploadTreeResponse, {}, set()),
    (models.SkippedLink, pb.SkippedLink, {}, set()),
    (models.TreeDownloadDone, pb.DownloadTreeDone, {}, set()),
    (models.ForkResult, pb.ForkSandboxResponse, {}, set()),
    # RestoreSnapshot and CreateFromSnapshot answer as a fork does.
    (models.ForkResult, pb.RestoreSnapshotResponse, {}, set()),
    (models.ForkResult, pb.CreateFromSnapshotResponse, {}, set()),
    (models.SnapshotInfo, pb.SnapshotInfo, {}, set()),
    (models.TemplateInfo, pb.TemplateInfo, {}, set()),
    (models.RuntimeInfo, pb.RuntimeInfo, {}, set()),
    (models.DiskLimit, pb.DiskLimit, {}, set()),
    (models.TenantUsage, pb.TenantUsage, {}, set()),
    (models.QuotaUse, pb.QuotaUse, {}, set()),
    (models.ProcessRequest, pb.StartProcessRequest, {}, {"instance_id"}),
    (models.ProcessInfo, pb.ProcessInfo, {}, set()),
    (models.ProcessChunk, pb.ProcessChunk, {}, set()),
    (models.ProcessExit, pb.ProcessExit, {}, set()),
    (models.ListeningPort, pb.ListeningPort, {}, set()),
    (models.Preview, pb.CreatePreviewResponse, {}, set()),
]
#: Models with no message of their own: ExecOutput is ExecStreamResponse's stdout/stderr oneof.
NO_MESSAGE = {models.ExecOutput}


def test_every_model_has_its_message_listed() -> None:
    # A new model must be added to PROTO_PAIRS (or NO_MESSAGE, with the reason).
    found = {
        value
        for value in vars(models).values()
        if isinstance(value, type) and dataclasses.is_dataclass(value)
    }
    assert found == {pair[0] for pair in PROTO_PAIRS} | NO_MESSAGE


def _model_fields(model: type) -> list[str]:
    return [f.name for f in dataclasses.fields(model)]


@pytest.mark.parametrize(
    ("model", "message", "renamed", "proto_only"),
    PROTO_PAIRS,
    ids=[pair[0].__name__ for pair in PROTO_PAIRS],
)
def test_model_fields_match_the_proto(
    model: type, message: Any, renamed: dict[str, str], proto_only: set[str]
) -> None:
    expected = {renamed.get(name, name) for name in _model_fields(model)}
    assert set(message.DESCRIPTOR.fields_by_name) - proto_only == expected


# Every field set to a non-default value, so a field convert.py forgets is lost.
OPTIONS = models.SandboxOptions(
    image="img:1",
    env={"A": "1"},
    workdir="/w",
    memory_bytes=1 << 26,
    cpus=1.5,
    pids_limit=99,
    network=models.NetworkPolicy("allow", ("*.example.com:443", "10.0.0.0/8"), ("a.example.com",)),
    runtime=models.Runtime.RUNSC,
    labels={"team": "a"},
    idle_ttl_seconds=60,
    disable_read_guard=True,
    allow_ptrace=True,
    max_lifetime_seconds=3600,
    delete_after_stopped_seconds=600,
    disk_bytes=1 << 30,
    secrets=(secrets.Secret("TOKEN", "v-1", ("api.test", "*.b.test"), env="TOKEN"),),
)
ROUND_TRIPS: list[tuple[object, Any, Any]] = [
    (models.NetworkPolicy("full"), convert.policy_to_pb, convert.policy_from_pb),
    (
        models.NetworkDecision(
            1, "pypi.org", 443, "151.101.0.223", True, "pypi.org", "ok", "connect"
        ),
        convert.decision_to_pb,
        convert.decision_from_pb,
    ),
    (OPTIONS, convert.options_to_pb, convert.options_from_pb),
    (
        models.TreeUploadResult(
            1, 2, 3, 4, (models.SkippedLink("docs", "/", "it points to an absolute path"),), 7
        ),
        convert.tree_upload_to_pb,
        convert.tree_upload_from_pb,
    ),
    (
        # A reply never carries a secret's value (info_to_pb): the info as a daemon keeps it.
        models.SandboxInfo(
            "i-1",
            "stopped",
            "c1",
            "v1",
            models.SandboxOptions.from_json(OPTIONS.to_json()),
            123,
            456,
            "idle",
        ),
        convert.info_to_pb,
        convert.info_from_pb,
    ),
    (
        models.FileInfo("/w/l", "l", models.FileType.SYMLINK, 5, 0o777, 9, "target"),
        convert.file_info_to_pb,
        convert.file_info_from_pb,
    ),
    (
        models.ExistsResult(True, models.FileType.DIRECTORY),
        convert.exists_to_pb,
        convert.exists_from_pb,
    ),
    (
        models.ExecRequest(shell="echo", cwd="/w", env={"B": "2"}, stdin=b"in", timeout_ms=5),
        lambda r: convert.exec_request_to_pb("i-1", r),
        convert.exec_request_from_pb,
    ),
    (
        models.ExecRequest(argv=("ls", "-l")),
        lambda r: convert.exec_request_to_pb("i-1", r),
        convert.exec_request_from_pb,
    ),
    (
        models.ExecResult(b"o", b"e", -9, True, 7, True, True),
        convert.exec_result_to_pb,
        convert.exec_result_from_pb,
    ),
    (
        models.ServerStatus(
            "1",
            "local",
            "ns",
            models.PoolStatus(1, 2, 3, 4),
            disk=models.DiskLimit(True, 5, ""),
            tenants=(models.TenantUsage("acme", (models.QuotaUse("cpus", 1.5, 4.0),)),),
        ),
        convert.status_to_pb,
        convert.status_from_pb,
    ),
    (
        models.TemplateInfo("sandboxd-template:ns-ab12", True, 3, 4096),
        convert.template_to_pb,
        convert.template_from_pb,
    ),
    (
        models.SnapshotInfo("s-1", "i-1", 5, 123, "copy", 7, OPTIONS),
        convert.snapshot_to_pb,
        convert.snapshot_from_pb,
    ),
    (
        [models.ToolDescription("t", "does t", {"type": "object", "properties": {}})],
        convert.tool_descriptions_to_pb,
        convert.tool_descriptions_from_pb,
    ),
]


@pytest.mark.parametrize(
    ("value", "to_pb", "from_pb"), ROUND_TRIPS, ids=[type(v[0]).__name__ for v in ROUND_TRIPS]
)
def test_convert_round_trips_every_field(value: object, to_pb: Any, from_pb: Any) -> None:
    assert from_pb(to_pb(value)) == value


def test_replies_never_carry_a_secret_value() -> None:
    info = models.SandboxInfo("i-1", "running", "c1", "v1", OPTIONS, 1, 0, "")
    assert OPTIONS.secrets[0].value.reveal() == "v-1"
    assert b"v-1" not in convert.info_to_pb(info).SerializeToString()
    assert b"v-1" in convert.options_to_pb(OPTIONS).SerializeToString()  # a request does
    assert "v-1" not in repr(OPTIONS) and "v-1" not in str(schemas.Sandbox.from_model(info))


def test_round_trip_values_set_every_field() -> None:
    defaults = models.SandboxOptions()
    unset = [
        f.name
        for f in dataclasses.fields(models.SandboxOptions)
        if getattr(OPTIONS, f.name) == getattr(defaults, f.name)
    ]
    assert unset == []


# model, HTTP schema, HTTP-only fields. Bytes fields are <name>_base64 (the one
# base64 naming, shared with the executor's wire).
HTTP_PAIRS: list[tuple[type, type[BaseModel], set[str]]] = [
    (models.SandboxOptions, schemas.SandboxOptions, set()),
    (secrets.Secret, schemas.Secret, set()),
    (models.SandboxInfo, schemas.Sandbox, {"warnings"}),
    (models.NetworkPolicy, schemas.NetworkPolicy, set()),
    (models.NetworkDecision, schemas.NetworkDecision, set()),
    (models.FileInfo, schemas.FileInfo, set()),
    (models.ReadFileResult, schemas.ReadFileResponse, set()),
    (models.WriteFileResult, schemas.WriteFileResponse, set()),
    (models.ExistsResult, schemas.ExistsResponse, set()),
    (models.ExecRequest, schemas.ExecRequest, set()),
    (models.ExecResult, schemas.ExecResponse, set()),
    (models.ExecExit, schemas.ExecExit, set()),
    (models.PoolStatus, schemas.PoolStatus, set()),
    (models.ServerStatus, schemas.ServerStatus, set()),
    (models.DiskLimit, schemas.DiskLimit, set()),
    (models.TenantUsage, schemas.TenantUsage, set()),
    (models.QuotaUse, schemas.QuotaUse, set()),
    (models.SandboxToolResult, schemas.ToolCallResponse, set()),
    (models.ToolDescription, schemas.ToolDescription, set()),
    (models.SnapshotInfo, snapshot_routes.Snapshot, set()),
    (models.TemplateInfo, template_routes.Template, set()),
    (models.ForkResult, snapshot_routes.SnapshotCopyResponse, set()),
]


def _http_name(model: type, field: dataclasses.Field[Any]) -> str:
    default = field.default if field.default is not dataclasses.MISSING else None
    is_bytes = field.type in ("bytes", bytes) or isinstance(default, bytes)
    return field.name + BASE64_SUFFIX if is_bytes else field.name


@pytest.mark.parametrize(
    ("model", "schema", "http_only"), HTTP_PAIRS, ids=[pair[0].__name__ for pair in HTTP_PAIRS]
)
def test_model_fields_match_the_http_schema(
    model: type, schema: type[BaseModel], http_only: set[str]
) -> None:
    expected = {_http_name(model, f) for f in dataclasses.fields(model)}
    assert set(schema.model_fields) - http_only == expected


def test_every_base64_field_of_the_http_api_uses_the_one_suffix() -> None:
    for name in dir(schemas):
        schema = getattr(schemas, name)
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            for field in schema.model_fields:
                assert "b64" not in field or field.endswith(BASE64_SUFFIX), (name, field)

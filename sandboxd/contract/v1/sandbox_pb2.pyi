from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NetworkMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NETWORK_MODE_UNSPECIFIED: _ClassVar[NetworkMode]
    NETWORK_MODE_NONE: _ClassVar[NetworkMode]
    NETWORK_MODE_ALLOW: _ClassVar[NetworkMode]
    NETWORK_MODE_FULL: _ClassVar[NetworkMode]

class Runtime(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUNTIME_UNSPECIFIED: _ClassVar[Runtime]
    RUNTIME_RUNC: _ClassVar[Runtime]
    RUNTIME_RUNSC: _ClassVar[Runtime]

class FileType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILE_TYPE_UNSPECIFIED: _ClassVar[FileType]
    FILE_TYPE_FILE: _ClassVar[FileType]
    FILE_TYPE_DIRECTORY: _ClassVar[FileType]
    FILE_TYPE_SYMLINK: _ClassVar[FileType]
    FILE_TYPE_OTHER: _ClassVar[FileType]
NETWORK_MODE_UNSPECIFIED: NetworkMode
NETWORK_MODE_NONE: NetworkMode
NETWORK_MODE_ALLOW: NetworkMode
NETWORK_MODE_FULL: NetworkMode
RUNTIME_UNSPECIFIED: Runtime
RUNTIME_RUNC: Runtime
RUNTIME_RUNSC: Runtime
FILE_TYPE_UNSPECIFIED: FileType
FILE_TYPE_FILE: FileType
FILE_TYPE_DIRECTORY: FileType
FILE_TYPE_SYMLINK: FileType
FILE_TYPE_OTHER: FileType

class ExtendSandboxRequest(_message.Message):
    __slots__ = ("instance_id", "seconds")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    seconds: int
    def __init__(self, instance_id: _Optional[str] = ..., seconds: _Optional[int] = ...) -> None: ...

class ExtendSandboxResponse(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ...) -> None: ...

class SnapshotInfo(_message.Message):
    __slots__ = ("name", "source_id", "size_bytes", "created_at_ms", "method", "duration_ms", "options")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    source_id: str
    size_bytes: int
    created_at_ms: int
    method: str
    duration_ms: int
    options: SandboxOptions
    def __init__(self, name: _Optional[str] = ..., source_id: _Optional[str] = ..., size_bytes: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., method: _Optional[str] = ..., duration_ms: _Optional[int] = ..., options: _Optional[_Union[SandboxOptions, _Mapping]] = ...) -> None: ...

class CreateSnapshotRequest(_message.Message):
    __slots__ = ("instance_id", "name")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    name: str
    def __init__(self, instance_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class CreateSnapshotResponse(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: SnapshotInfo
    def __init__(self, snapshot: _Optional[_Union[SnapshotInfo, _Mapping]] = ...) -> None: ...

class ListSnapshotsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSnapshotsResponse(_message.Message):
    __slots__ = ("snapshots",)
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    snapshots: _containers.RepeatedCompositeFieldContainer[SnapshotInfo]
    def __init__(self, snapshots: _Optional[_Iterable[_Union[SnapshotInfo, _Mapping]]] = ...) -> None: ...

class DeleteSnapshotRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSnapshotResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RestoreSnapshotRequest(_message.Message):
    __slots__ = ("instance_id", "name")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    name: str
    def __init__(self, instance_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class RestoreSnapshotResponse(_message.Message):
    __slots__ = ("sandbox", "method", "duration_ms")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    method: str
    duration_ms: int
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ..., method: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class CreateFromSnapshotRequest(_message.Message):
    __slots__ = ("name", "new_id", "options")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    new_id: str
    options: SandboxOptions
    def __init__(self, name: _Optional[str] = ..., new_id: _Optional[str] = ..., options: _Optional[_Union[SandboxOptions, _Mapping]] = ...) -> None: ...

class CreateFromSnapshotResponse(_message.Message):
    __slots__ = ("sandbox", "method", "duration_ms")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    method: str
    duration_ms: int
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ..., method: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class NetworkPolicy(_message.Message):
    __slots__ = ("mode", "allow", "deny")
    MODE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    DENY_FIELD_NUMBER: _ClassVar[int]
    mode: NetworkMode
    allow: _containers.RepeatedScalarFieldContainer[str]
    deny: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, mode: _Optional[_Union[NetworkMode, str]] = ..., allow: _Optional[_Iterable[str]] = ..., deny: _Optional[_Iterable[str]] = ...) -> None: ...

class SetNetworkPolicyRequest(_message.Message):
    __slots__ = ("instance_id", "policy")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    policy: NetworkPolicy
    def __init__(self, instance_id: _Optional[str] = ..., policy: _Optional[_Union[NetworkPolicy, _Mapping]] = ...) -> None: ...

class SetNetworkPolicyResponse(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ...) -> None: ...

class NetworkDecision(_message.Message):
    __slots__ = ("at_ms", "host", "port", "address", "allowed", "rule", "reason", "via")
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VIA_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    host: str
    port: int
    address: str
    allowed: bool
    rule: str
    reason: str
    via: str
    def __init__(self, at_ms: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., address: _Optional[str] = ..., allowed: _Optional[bool] = ..., rule: _Optional[str] = ..., reason: _Optional[str] = ..., via: _Optional[str] = ...) -> None: ...

class GetNetworkLogRequest(_message.Message):
    __slots__ = ("instance_id", "limit")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    limit: int
    def __init__(self, instance_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class GetNetworkLogResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[NetworkDecision]
    def __init__(self, entries: _Optional[_Iterable[_Union[NetworkDecision, _Mapping]]] = ...) -> None: ...

class TemplateFromSnapshotRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class BuildTemplateHeader(_message.Message):
    __slots__ = ("dockerfile",)
    DOCKERFILE_FIELD_NUMBER: _ClassVar[int]
    dockerfile: str
    def __init__(self, dockerfile: _Optional[str] = ...) -> None: ...

class BuildTemplateRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: BuildTemplateHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[BuildTemplateHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class TemplateInfo(_message.Message):
    __slots__ = ("image", "cached", "duration_ms", "size_bytes")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    image: str
    cached: bool
    duration_ms: int
    size_bytes: int
    def __init__(self, image: _Optional[str] = ..., cached: _Optional[bool] = ..., duration_ms: _Optional[int] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class BuildTemplateResponse(_message.Message):
    __slots__ = ("log", "done")
    LOG_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    log: str
    done: TemplateInfo
    def __init__(self, log: _Optional[str] = ..., done: _Optional[_Union[TemplateInfo, _Mapping]] = ...) -> None: ...

class SandboxOptions(_message.Message):
    __slots__ = ("image", "env", "workdir", "memory_bytes", "cpus", "pids_limit", "network", "runtime", "labels", "idle_ttl_seconds", "disable_read_guard", "allow_ptrace", "max_lifetime_seconds", "delete_after_stopped_seconds", "disk_bytes", "secrets")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    PIDS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DISABLE_READ_GUARD_FIELD_NUMBER: _ClassVar[int]
    ALLOW_PTRACE_FIELD_NUMBER: _ClassVar[int]
    MAX_LIFETIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DELETE_AFTER_STOPPED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    image: str
    env: _containers.ScalarMap[str, str]
    workdir: str
    memory_bytes: int
    cpus: float
    pids_limit: int
    network: NetworkPolicy
    runtime: Runtime
    labels: _containers.ScalarMap[str, str]
    idle_ttl_seconds: int
    disable_read_guard: bool
    allow_ptrace: bool
    max_lifetime_seconds: int
    delete_after_stopped_seconds: int
    disk_bytes: int
    secrets: _containers.RepeatedCompositeFieldContainer[Secret]
    def __init__(self, image: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., workdir: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., cpus: _Optional[float] = ..., pids_limit: _Optional[int] = ..., network: _Optional[_Union[NetworkPolicy, _Mapping]] = ..., runtime: _Optional[_Union[Runtime, str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., idle_ttl_seconds: _Optional[int] = ..., disable_read_guard: _Optional[bool] = ..., allow_ptrace: _Optional[bool] = ..., max_lifetime_seconds: _Optional[int] = ..., delete_after_stopped_seconds: _Optional[int] = ..., disk_bytes: _Optional[int] = ..., secrets: _Optional[_Iterable[_Union[Secret, _Mapping]]] = ...) -> None: ...

class Secret(_message.Message):
    __slots__ = ("name", "value", "hosts", "env", "file")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    hosts: _containers.RepeatedScalarFieldContainer[str]
    env: str
    file: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., hosts: _Optional[_Iterable[str]] = ..., env: _Optional[str] = ..., file: _Optional[str] = ...) -> None: ...

class SandboxInfo(_message.Message):
    __slots__ = ("instance_id", "state", "container_id", "volume", "options", "created_at_ms", "expires_at_ms", "termination_reason", "warnings")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_REASON_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    state: str
    container_id: str
    volume: str
    options: SandboxOptions
    created_at_ms: int
    expires_at_ms: int
    termination_reason: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, instance_id: _Optional[str] = ..., state: _Optional[str] = ..., container_id: _Optional[str] = ..., volume: _Optional[str] = ..., options: _Optional[_Union[SandboxOptions, _Mapping]] = ..., created_at_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., termination_reason: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateSandboxRequest(_message.Message):
    __slots__ = ("instance_id", "options")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    options: SandboxOptions
    def __init__(self, instance_id: _Optional[str] = ..., options: _Optional[_Union[SandboxOptions, _Mapping]] = ...) -> None: ...

class CreateSandboxResponse(_message.Message):
    __slots__ = ("sandbox", "created")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    created: bool
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetSandboxRequest(_message.Message):
    __slots__ = ("instance_id",)
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class GetSandboxResponse(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ...) -> None: ...

class ListSandboxesRequest(_message.Message):
    __slots__ = ("label_selector",)
    class LabelSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    label_selector: _containers.ScalarMap[str, str]
    def __init__(self, label_selector: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListSandboxesResponse(_message.Message):
    __slots__ = ("sandboxes",)
    SANDBOXES_FIELD_NUMBER: _ClassVar[int]
    sandboxes: _containers.RepeatedCompositeFieldContainer[SandboxInfo]
    def __init__(self, sandboxes: _Optional[_Iterable[_Union[SandboxInfo, _Mapping]]] = ...) -> None: ...

class RestartSandboxRequest(_message.Message):
    __slots__ = ("instance_id",)
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class RestartSandboxResponse(_message.Message):
    __slots__ = ("sandbox",)
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ...) -> None: ...

class DeleteSandboxRequest(_message.Message):
    __slots__ = ("instance_id",)
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class DeleteSandboxResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("version", "backend", "namespace", "pool", "runtimes", "disk", "tenants")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    DISK_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    version: str
    backend: str
    namespace: str
    pool: PoolStatus
    runtimes: _containers.RepeatedCompositeFieldContainer[RuntimeInfo]
    disk: DiskLimit
    tenants: _containers.RepeatedCompositeFieldContainer[TenantUsage]
    def __init__(self, version: _Optional[str] = ..., backend: _Optional[str] = ..., namespace: _Optional[str] = ..., pool: _Optional[_Union[PoolStatus, _Mapping]] = ..., runtimes: _Optional[_Iterable[_Union[RuntimeInfo, _Mapping]]] = ..., disk: _Optional[_Union[DiskLimit, _Mapping]] = ..., tenants: _Optional[_Iterable[_Union[TenantUsage, _Mapping]]] = ...) -> None: ...

class TenantUsage(_message.Message):
    __slots__ = ("tenant", "quotas")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    quotas: _containers.RepeatedCompositeFieldContainer[QuotaUse]
    def __init__(self, tenant: _Optional[str] = ..., quotas: _Optional[_Iterable[_Union[QuotaUse, _Mapping]]] = ...) -> None: ...

class QuotaUse(_message.Message):
    __slots__ = ("name", "used", "limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    used: float
    limit: float
    def __init__(self, name: _Optional[str] = ..., used: _Optional[float] = ..., limit: _Optional[float] = ...) -> None: ...

class DiskLimit(_message.Message):
    __slots__ = ("enforced", "bytes", "reason")
    ENFORCED_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    enforced: bool
    bytes: int
    reason: str
    def __init__(self, enforced: _Optional[bool] = ..., bytes: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class PoolStatus(_message.Message):
    __slots__ = ("size", "ready", "served", "started")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SERVED_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    size: int
    ready: int
    served: int
    started: int
    def __init__(self, size: _Optional[int] = ..., ready: _Optional[int] = ..., served: _Optional[int] = ..., started: _Optional[int] = ...) -> None: ...

class RuntimeInfo(_message.Message):
    __slots__ = ("name", "version", "platform", "available")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    platform: str
    available: bool
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., platform: _Optional[str] = ..., available: _Optional[bool] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("path", "name", "type", "size", "mode", "mtime_ns", "symlink_target")
    PATH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MTIME_NS_FIELD_NUMBER: _ClassVar[int]
    SYMLINK_TARGET_FIELD_NUMBER: _ClassVar[int]
    path: str
    name: str
    type: FileType
    size: int
    mode: int
    mtime_ns: int
    symlink_target: str
    def __init__(self, path: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[_Union[FileType, str]] = ..., size: _Optional[int] = ..., mode: _Optional[int] = ..., mtime_ns: _Optional[int] = ..., symlink_target: _Optional[str] = ...) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ("instance_id", "path", "offset", "length")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    offset: int
    length: int
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class ReadFileResponse(_message.Message):
    __slots__ = ("data", "size", "eof")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    size: int
    eof: bool
    def __init__(self, data: _Optional[bytes] = ..., size: _Optional[int] = ..., eof: _Optional[bool] = ...) -> None: ...

class WriteFileRequest(_message.Message):
    __slots__ = ("instance_id", "path", "data", "create_parents", "expected_sha256", "mode")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CREATE_PARENTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    data: bytes
    create_parents: bool
    expected_sha256: str
    mode: int
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., data: _Optional[bytes] = ..., create_parents: _Optional[bool] = ..., expected_sha256: _Optional[str] = ..., mode: _Optional[int] = ...) -> None: ...

class WriteFileResponse(_message.Message):
    __slots__ = ("size", "sha256", "created")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: str
    created: bool
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class StatRequest(_message.Message):
    __slots__ = ("instance_id", "path", "follow_symlinks")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    follow_symlinks: bool
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., follow_symlinks: _Optional[bool] = ...) -> None: ...

class StatResponse(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: FileInfo
    def __init__(self, info: _Optional[_Union[FileInfo, _Mapping]] = ...) -> None: ...

class ListDirRequest(_message.Message):
    __slots__ = ("instance_id", "path")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class ListDirResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[FileInfo]
    def __init__(self, entries: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ...) -> None: ...

class ExistsRequest(_message.Message):
    __slots__ = ("instance_id", "path")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class ExistsResponse(_message.Message):
    __slots__ = ("exists", "type")
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    exists: bool
    type: FileType
    def __init__(self, exists: _Optional[bool] = ..., type: _Optional[_Union[FileType, str]] = ...) -> None: ...

class MakeDirRequest(_message.Message):
    __slots__ = ("instance_id", "path", "parents", "exist_ok")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    EXIST_OK_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    parents: bool
    exist_ok: bool
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., parents: _Optional[bool] = ..., exist_ok: _Optional[bool] = ...) -> None: ...

class MakeDirResponse(_message.Message):
    __slots__ = ("created",)
    CREATED_FIELD_NUMBER: _ClassVar[int]
    created: bool
    def __init__(self, created: _Optional[bool] = ...) -> None: ...

class RemoveRequest(_message.Message):
    __slots__ = ("instance_id", "path", "recursive", "missing_ok")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_FIELD_NUMBER: _ClassVar[int]
    MISSING_OK_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    recursive: bool
    missing_ok: bool
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., recursive: _Optional[bool] = ..., missing_ok: _Optional[bool] = ...) -> None: ...

class RemoveResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("instance_id", "argv", "shell", "cwd", "env", "stdin", "timeout_ms")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    argv: ArgV
    shell: str
    cwd: str
    env: _containers.ScalarMap[str, str]
    stdin: bytes
    timeout_ms: int
    def __init__(self, instance_id: _Optional[str] = ..., argv: _Optional[_Union[ArgV, _Mapping]] = ..., shell: _Optional[str] = ..., cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., stdin: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ArgV(_message.Message):
    __slots__ = ("args",)
    ARGS_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, args: _Optional[_Iterable[str]] = ...) -> None: ...

class ExecResponse(_message.Message):
    __slots__ = ("stdout", "stderr", "exit_code", "timed_out", "duration_ms", "stdout_truncated", "stderr_truncated")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDERR_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    exit_code: int
    timed_out: bool
    duration_ms: int
    stdout_truncated: bool
    stderr_truncated: bool
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exit_code: _Optional[int] = ..., timed_out: _Optional[bool] = ..., duration_ms: _Optional[int] = ..., stdout_truncated: _Optional[bool] = ..., stderr_truncated: _Optional[bool] = ...) -> None: ...

class ExecStreamRequest(_message.Message):
    __slots__ = ("exec",)
    EXEC_FIELD_NUMBER: _ClassVar[int]
    exec: ExecRequest
    def __init__(self, exec: _Optional[_Union[ExecRequest, _Mapping]] = ...) -> None: ...

class ExecStreamResponse(_message.Message):
    __slots__ = ("stdout", "stderr", "exit")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    exit: ExecExit
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exit: _Optional[_Union[ExecExit, _Mapping]] = ...) -> None: ...

class ExecExit(_message.Message):
    __slots__ = ("exit_code", "timed_out", "duration_ms")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    timed_out: bool
    duration_ms: int
    def __init__(self, exit_code: _Optional[int] = ..., timed_out: _Optional[bool] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ("instance_id", "name", "arguments_json", "tool_call_id", "cwd")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    name: str
    arguments_json: str
    tool_call_id: str
    cwd: str
    def __init__(self, instance_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., cwd: _Optional[str] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ("text", "is_error", "fields_json")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    FIELDS_JSON_FIELD_NUMBER: _ClassVar[int]
    text: str
    is_error: bool
    fields_json: str
    def __init__(self, text: _Optional[str] = ..., is_error: _Optional[bool] = ..., fields_json: _Optional[str] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("instance_id", "file_path", "offset", "limit", "tool_call_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    file_path: str
    offset: int
    limit: int
    tool_call_id: str
    def __init__(self, instance_id: _Optional[str] = ..., file_path: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("text", "is_error", "path", "total_lines", "start_line", "end_line", "truncated", "next_offset", "cut_lines")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CUT_LINES_FIELD_NUMBER: _ClassVar[int]
    text: str
    is_error: bool
    path: str
    total_lines: int
    start_line: int
    end_line: int
    truncated: bool
    next_offset: int
    cut_lines: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, text: _Optional[str] = ..., is_error: _Optional[bool] = ..., path: _Optional[str] = ..., total_lines: _Optional[int] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., truncated: _Optional[bool] = ..., next_offset: _Optional[int] = ..., cut_lines: _Optional[_Iterable[int]] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("instance_id", "file_path", "content", "tool_call_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    file_path: str
    content: str
    tool_call_id: str
    def __init__(self, instance_id: _Optional[str] = ..., file_path: _Optional[str] = ..., content: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("text", "is_error", "path", "created", "lines", "bytes", "previous_lines")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_LINES_FIELD_NUMBER: _ClassVar[int]
    text: str
    is_error: bool
    path: str
    created: bool
    lines: int
    bytes: int
    previous_lines: int
    def __init__(self, text: _Optional[str] = ..., is_error: _Optional[bool] = ..., path: _Optional[str] = ..., created: _Optional[bool] = ..., lines: _Optional[int] = ..., bytes: _Optional[int] = ..., previous_lines: _Optional[int] = ...) -> None: ...

class EditRequest(_message.Message):
    __slots__ = ("instance_id", "file_path", "old_string", "new_string", "replace_all", "tool_call_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    OLD_STRING_FIELD_NUMBER: _ClassVar[int]
    NEW_STRING_FIELD_NUMBER: _ClassVar[int]
    REPLACE_ALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    file_path: str
    old_string: str
    new_string: str
    replace_all: bool
    tool_call_id: str
    def __init__(self, instance_id: _Optional[str] = ..., file_path: _Optional[str] = ..., old_string: _Optional[str] = ..., new_string: _Optional[str] = ..., replace_all: _Optional[bool] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class EditResponse(_message.Message):
    __slots__ = ("text", "is_error", "path", "replacements", "first_line", "last_line", "lines", "match_level", "created")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    FIRST_LINE_FIELD_NUMBER: _ClassVar[int]
    LAST_LINE_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    MATCH_LEVEL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    text: str
    is_error: bool
    path: str
    replacements: int
    first_line: int
    last_line: int
    lines: _containers.RepeatedScalarFieldContainer[int]
    match_level: str
    created: bool
    def __init__(self, text: _Optional[str] = ..., is_error: _Optional[bool] = ..., path: _Optional[str] = ..., replacements: _Optional[int] = ..., first_line: _Optional[int] = ..., last_line: _Optional[int] = ..., lines: _Optional[_Iterable[int]] = ..., match_level: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class BashRequest(_message.Message):
    __slots__ = ("instance_id", "command", "timeout", "description", "run_in_background", "workdir", "tool_call_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    RUN_IN_BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    command: str
    timeout: int
    description: str
    run_in_background: bool
    workdir: str
    tool_call_id: str
    def __init__(self, instance_id: _Optional[str] = ..., command: _Optional[str] = ..., timeout: _Optional[int] = ..., description: _Optional[str] = ..., run_in_background: _Optional[bool] = ..., workdir: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class BashResponse(_message.Message):
    __slots__ = ("text", "is_error", "exit_code", "timed_out", "cancelled", "duration_ms", "truncated", "log_path", "background", "job_id", "pid", "bash_id")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    BASH_ID_FIELD_NUMBER: _ClassVar[int]
    text: str
    is_error: bool
    exit_code: int
    timed_out: bool
    cancelled: bool
    duration_ms: int
    truncated: bool
    log_path: str
    background: bool
    job_id: int
    pid: int
    bash_id: str
    def __init__(self, text: _Optional[str] = ..., is_error: _Optional[bool] = ..., exit_code: _Optional[int] = ..., timed_out: _Optional[bool] = ..., cancelled: _Optional[bool] = ..., duration_ms: _Optional[int] = ..., truncated: _Optional[bool] = ..., log_path: _Optional[str] = ..., background: _Optional[bool] = ..., job_id: _Optional[int] = ..., pid: _Optional[int] = ..., bash_id: _Optional[str] = ...) -> None: ...

class GrepRequest(_message.Message):
    __slots__ = ("instance_id", "pattern", "path", "glob", "type", "output_mode", "case_insensitive", "line_numbers", "after_context", "before_context", "context", "multiline", "literal", "head_limit", "offset", "tool_call_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    GLOB_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_MODE_FIELD_NUMBER: _ClassVar[int]
    CASE_INSENSITIVE_FIELD_NUMBER: _ClassVar[int]
    LINE_NUMBERS_FIELD_NUMBER: _ClassVar[int]
    AFTER_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MULTILINE_FIELD_NUMBER: _ClassVar[int]
    LITERAL_FIELD_NUMBER: _ClassVar[int]
    HEAD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    pattern: str
    path: str
    glob: str
    type: str
    output_mode: str
    case_insensitive: bool
    line_numbers: bool
    after_context: int
    before_context: int
    context: int
    multiline: bool
    literal: bool
    head_limit: int
    offset: int
    tool_call_id: str
    def __init__(self, instance_id: _Optional[str] = ..., pattern: _Optional[str] = ..., path: _Optional[str] = ..., glob: _Optional[str] = ..., type: _Optional[str] = ..., output_mode: _Optional[str] = ..., case_insensitive: _Optional[bool] = ..., line_numbers: _Optional[bool] = ..., after_context: _Optional[int] = ..., before_context: _Optional[int] = ..., context: _Optional[int] = ..., multiline: _Optional[bool] = ..., literal: _Optional[bool] = ..., head_limit: _Optional[int] = ..., offset: _Optional[int] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class GrepResponse(_message.Message):
    __slots__ = ("text", "is_error", "mode", "total", "matches", "files", "file_count", "truncated", "next_offset", "timed_out", "engine")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    FILE_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    text: str
    is_error: bool
    mode: str
    total: int
    matches: int
    files: _containers.RepeatedScalarFieldContainer[str]
    file_count: int
    truncated: bool
    next_offset: int
    timed_out: bool
    engine: str
    def __init__(self, text: _Optional[str] = ..., is_error: _Optional[bool] = ..., mode: _Optional[str] = ..., total: _Optional[int] = ..., matches: _Optional[int] = ..., files: _Optional[_Iterable[str]] = ..., file_count: _Optional[int] = ..., truncated: _Optional[bool] = ..., next_offset: _Optional[int] = ..., timed_out: _Optional[bool] = ..., engine: _Optional[str] = ...) -> None: ...

class GlobRequest(_message.Message):
    __slots__ = ("instance_id", "pattern", "path", "head_limit", "offset", "no_ignore", "tool_call_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    HEAD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NO_IGNORE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    pattern: str
    path: str
    head_limit: int
    offset: int
    no_ignore: bool
    tool_call_id: str
    def __init__(self, instance_id: _Optional[str] = ..., pattern: _Optional[str] = ..., path: _Optional[str] = ..., head_limit: _Optional[int] = ..., offset: _Optional[int] = ..., no_ignore: _Optional[bool] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class GlobResponse(_message.Message):
    __slots__ = ("text", "is_error", "files", "total", "truncated", "next_offset", "ignored", "ignored_incomplete")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    IGNORED_FIELD_NUMBER: _ClassVar[int]
    IGNORED_INCOMPLETE_FIELD_NUMBER: _ClassVar[int]
    text: str
    is_error: bool
    files: _containers.RepeatedScalarFieldContainer[str]
    total: int
    truncated: bool
    next_offset: int
    ignored: int
    ignored_incomplete: bool
    def __init__(self, text: _Optional[str] = ..., is_error: _Optional[bool] = ..., files: _Optional[_Iterable[str]] = ..., total: _Optional[int] = ..., truncated: _Optional[bool] = ..., next_offset: _Optional[int] = ..., ignored: _Optional[int] = ..., ignored_incomplete: _Optional[bool] = ...) -> None: ...

class ToolCallsRequest(_message.Message):
    __slots__ = ("call_id", "call", "cancel", "batch")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    call: CallToolRequest
    cancel: bool
    batch: _containers.RepeatedCompositeFieldContainer[ToolCallsRequest]
    def __init__(self, call_id: _Optional[int] = ..., call: _Optional[_Union[CallToolRequest, _Mapping]] = ..., cancel: _Optional[bool] = ..., batch: _Optional[_Iterable[_Union[ToolCallsRequest, _Mapping]]] = ...) -> None: ...

class ToolCallsResponse(_message.Message):
    __slots__ = ("call_id", "result", "error", "batch")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    result: CallToolResponse
    error: CallError
    batch: _containers.RepeatedCompositeFieldContainer[ToolCallsResponse]
    def __init__(self, call_id: _Optional[int] = ..., result: _Optional[_Union[CallToolResponse, _Mapping]] = ..., error: _Optional[_Union[CallError, _Mapping]] = ..., batch: _Optional[_Iterable[_Union[ToolCallsResponse, _Mapping]]] = ...) -> None: ...

class CallError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class UploadHeader(_message.Message):
    __slots__ = ("instance_id", "path", "create_parents", "expected_sha256", "mode")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    CREATE_PARENTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    create_parents: bool
    expected_sha256: str
    mode: int
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., create_parents: _Optional[bool] = ..., expected_sha256: _Optional[str] = ..., mode: _Optional[int] = ...) -> None: ...

class UploadRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadResponse(_message.Message):
    __slots__ = ("size", "sha256", "created")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: str
    created: bool
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class DownloadRequest(_message.Message):
    __slots__ = ("instance_id", "path", "offset", "length")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    offset: int
    length: int
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class DownloadDone(_message.Message):
    __slots__ = ("size", "sha256", "file_size")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    FILE_SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    sha256: str
    file_size: int
    def __init__(self, size: _Optional[int] = ..., sha256: _Optional[str] = ..., file_size: _Optional[int] = ...) -> None: ...

class DownloadResponse(_message.Message):
    __slots__ = ("data", "done")
    DATA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    done: DownloadDone
    def __init__(self, data: _Optional[bytes] = ..., done: _Optional[_Union[DownloadDone, _Mapping]] = ...) -> None: ...

class UploadTreeHeader(_message.Message):
    __slots__ = ("instance_id", "path")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class UploadTreeRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: UploadTreeHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[UploadTreeHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class SkippedLink(_message.Message):
    __slots__ = ("path", "target", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    target: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., target: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class UploadTreeResponse(_message.Message):
    __slots__ = ("files", "directories", "symlinks", "bytes", "skipped_links", "links_skipped")
    FILES_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    SYMLINKS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_LINKS_FIELD_NUMBER: _ClassVar[int]
    LINKS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    files: int
    directories: int
    symlinks: int
    bytes: int
    skipped_links: _containers.RepeatedCompositeFieldContainer[SkippedLink]
    links_skipped: int
    def __init__(self, files: _Optional[int] = ..., directories: _Optional[int] = ..., symlinks: _Optional[int] = ..., bytes: _Optional[int] = ..., skipped_links: _Optional[_Iterable[_Union[SkippedLink, _Mapping]]] = ..., links_skipped: _Optional[int] = ...) -> None: ...

class DownloadTreeRequest(_message.Message):
    __slots__ = ("instance_id", "path", "gitignore")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    GITIGNORE_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    path: str
    gitignore: bool
    def __init__(self, instance_id: _Optional[str] = ..., path: _Optional[str] = ..., gitignore: _Optional[bool] = ...) -> None: ...

class DownloadTreeDone(_message.Message):
    __slots__ = ("entries", "bytes", "skipped")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    entries: int
    bytes: int
    skipped: int
    def __init__(self, entries: _Optional[int] = ..., bytes: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class DownloadTreeResponse(_message.Message):
    __slots__ = ("data", "done")
    DATA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    done: DownloadTreeDone
    def __init__(self, data: _Optional[bytes] = ..., done: _Optional[_Union[DownloadTreeDone, _Mapping]] = ...) -> None: ...

class ForkSandboxRequest(_message.Message):
    __slots__ = ("source_id", "new_id", "options")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    new_id: str
    options: SandboxOptions
    def __init__(self, source_id: _Optional[str] = ..., new_id: _Optional[str] = ..., options: _Optional[_Union[SandboxOptions, _Mapping]] = ...) -> None: ...

class ForkSandboxResponse(_message.Message):
    __slots__ = ("sandbox", "method", "duration_ms")
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    sandbox: SandboxInfo
    method: str
    duration_ms: int
    def __init__(self, sandbox: _Optional[_Union[SandboxInfo, _Mapping]] = ..., method: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToolDescription(_message.Message):
    __slots__ = ("name", "description", "input_schema_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ToolDescription]
    def __init__(self, tools: _Optional[_Iterable[_Union[ToolDescription, _Mapping]]] = ...) -> None: ...

class StartProcessRequest(_message.Message):
    __slots__ = ("instance_id", "argv", "shell", "cwd", "env", "pty")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    argv: ArgV
    shell: str
    cwd: str
    env: _containers.ScalarMap[str, str]
    pty: TerminalSize
    def __init__(self, instance_id: _Optional[str] = ..., argv: _Optional[_Union[ArgV, _Mapping]] = ..., shell: _Optional[str] = ..., cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., pty: _Optional[_Union[TerminalSize, _Mapping]] = ...) -> None: ...

class TerminalSize(_message.Message):
    __slots__ = ("rows", "cols")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ...) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ("handle", "pid", "command", "state", "exit_code", "signal", "pty", "started", "output_bytes", "log_path")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    handle: str
    pid: int
    command: _containers.RepeatedScalarFieldContainer[str]
    state: str
    exit_code: int
    signal: int
    pty: bool
    started: float
    output_bytes: int
    log_path: str
    def __init__(self, handle: _Optional[str] = ..., pid: _Optional[int] = ..., command: _Optional[_Iterable[str]] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., pty: _Optional[bool] = ..., started: _Optional[float] = ..., output_bytes: _Optional[int] = ..., log_path: _Optional[str] = ...) -> None: ...

class ProcessInput(_message.Message):
    __slots__ = ("instance_id", "handle", "offset", "data", "close_stdin")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSE_STDIN_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    handle: str
    offset: int
    data: bytes
    close_stdin: bool
    def __init__(self, instance_id: _Optional[str] = ..., handle: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., close_stdin: _Optional[bool] = ...) -> None: ...

class ProcessOutput(_message.Message):
    __slots__ = ("chunk", "exit")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    chunk: ProcessChunk
    exit: ProcessExit
    def __init__(self, chunk: _Optional[_Union[ProcessChunk, _Mapping]] = ..., exit: _Optional[_Union[ProcessExit, _Mapping]] = ...) -> None: ...

class ProcessChunk(_message.Message):
    __slots__ = ("stream", "data", "offset")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    stream: str
    data: bytes
    offset: int
    def __init__(self, stream: _Optional[str] = ..., data: _Optional[bytes] = ..., offset: _Optional[int] = ...) -> None: ...

class ProcessExit(_message.Message):
    __slots__ = ("info", "missed", "offset")
    INFO_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    info: ProcessInfo
    missed: int
    offset: int
    def __init__(self, info: _Optional[_Union[ProcessInfo, _Mapping]] = ..., missed: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ResizeProcessRequest(_message.Message):
    __slots__ = ("instance_id", "handle", "size")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    handle: str
    size: TerminalSize
    def __init__(self, instance_id: _Optional[str] = ..., handle: _Optional[str] = ..., size: _Optional[_Union[TerminalSize, _Mapping]] = ...) -> None: ...

class SignalProcessRequest(_message.Message):
    __slots__ = ("instance_id", "handle", "signal")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    handle: str
    signal: int
    def __init__(self, instance_id: _Optional[str] = ..., handle: _Optional[str] = ..., signal: _Optional[int] = ...) -> None: ...

class ListProcessesRequest(_message.Message):
    __slots__ = ("instance_id",)
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class ListProcessesResponse(_message.Message):
    __slots__ = ("processes",)
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ...) -> None: ...

class CreatePreviewRequest(_message.Message):
    __slots__ = ("instance_id", "port", "ttl_s")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    port: int
    ttl_s: int
    def __init__(self, instance_id: _Optional[str] = ..., port: _Optional[int] = ..., ttl_s: _Optional[int] = ...) -> None: ...

class CreatePreviewResponse(_message.Message):
    __slots__ = ("token", "expires_at", "path", "host")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    token: str
    expires_at: int
    path: str
    host: str
    def __init__(self, token: _Optional[str] = ..., expires_at: _Optional[int] = ..., path: _Optional[str] = ..., host: _Optional[str] = ...) -> None: ...

class PortInput(_message.Message):
    __slots__ = ("instance_id", "port", "host", "data", "close_write", "compact")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSE_WRITE_FIELD_NUMBER: _ClassVar[int]
    COMPACT_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    port: int
    host: str
    data: bytes
    close_write: bool
    compact: bool
    def __init__(self, instance_id: _Optional[str] = ..., port: _Optional[int] = ..., host: _Optional[str] = ..., data: _Optional[bytes] = ..., close_write: _Optional[bool] = ..., compact: _Optional[bool] = ...) -> None: ...

class PortOutput(_message.Message):
    __slots__ = ("opened", "data", "eof")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    opened: bool
    data: bytes
    eof: bool
    def __init__(self, opened: _Optional[bool] = ..., data: _Optional[bytes] = ..., eof: _Optional[bool] = ...) -> None: ...

class PortsInput(_message.Message):
    __slots__ = ("conn_id", "open", "data", "close_write", "reset", "window")
    CONN_ID_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSE_WRITE_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    conn_id: int
    open: PortInput
    data: bytes
    close_write: bool
    reset: bool
    window: int
    def __init__(self, conn_id: _Optional[int] = ..., open: _Optional[_Union[PortInput, _Mapping]] = ..., data: _Optional[bytes] = ..., close_write: _Optional[bool] = ..., reset: _Optional[bool] = ..., window: _Optional[int] = ...) -> None: ...

class PortsOutput(_message.Message):
    __slots__ = ("conn_id", "opened", "data", "eof", "error", "window")
    CONN_ID_FIELD_NUMBER: _ClassVar[int]
    OPENED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    conn_id: int
    opened: bool
    data: bytes
    eof: bool
    error: CallError
    window: int
    def __init__(self, conn_id: _Optional[int] = ..., opened: _Optional[bool] = ..., data: _Optional[bytes] = ..., eof: _Optional[bool] = ..., error: _Optional[_Union[CallError, _Mapping]] = ..., window: _Optional[int] = ...) -> None: ...

class ListPortsRequest(_message.Message):
    __slots__ = ("instance_id",)
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class ListeningPort(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class ListPortsResponse(_message.Message):
    __slots__ = ("ports",)
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ports: _containers.RepeatedCompositeFieldContainer[ListeningPort]
    def __init__(self, ports: _Optional[_Iterable[_Union[ListeningPort, _Mapping]]] = ...) -> None: ...

from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
RUNTIME_UNSPECIFIED: Runtime
RUNTIME_RUNC: Runtime
RUNTIME_RUNSC: Runtime
FILE_TYPE_UNSPECIFIED: FileType
FILE_TYPE_FILE: FileType
FILE_TYPE_DIRECTORY: FileType
FILE_TYPE_SYMLINK: FileType
FILE_TYPE_OTHER: FileType

class SandboxOptions(_message.Message):
    __slots__ = ("image", "env", "workdir", "memory_bytes", "cpus", "pids_limit", "network", "runtime", "labels")
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
    image: str
    env: _containers.ScalarMap[str, str]
    workdir: str
    memory_bytes: int
    cpus: float
    pids_limit: int
    network: bool
    runtime: Runtime
    labels: _containers.ScalarMap[str, str]
    def __init__(self, image: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., workdir: _Optional[str] = ..., memory_bytes: _Optional[int] = ..., cpus: _Optional[float] = ..., pids_limit: _Optional[int] = ..., network: _Optional[bool] = ..., runtime: _Optional[_Union[Runtime, str]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SandboxInfo(_message.Message):
    __slots__ = ("instance_id", "state", "container_id", "volume", "options", "created_at_ms")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    state: str
    container_id: str
    volume: str
    options: SandboxOptions
    created_at_ms: int
    def __init__(self, instance_id: _Optional[str] = ..., state: _Optional[str] = ..., container_id: _Optional[str] = ..., volume: _Optional[str] = ..., options: _Optional[_Union[SandboxOptions, _Mapping]] = ..., created_at_ms: _Optional[int] = ...) -> None: ...

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

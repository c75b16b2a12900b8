"""Request strategies for every RPC: valid, malformed and hostile values.

Safety rules (the local backend can touch the whole host):
- mutating verbs and tools get ``safe_paths``: relative, no ``..``, no
  absolute path, or values validation must refuse (empty, NUL, > 4096 bytes);
- read-only verbs may also get ``..`` and a few fixed absolute paths, never a
  device or /proc file that would read forever;
- every command (Exec, ExecStream, bash) comes from ``COMMANDS``, which only
  prints, sleeps briefly or fails, in whatever folder it runs.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from fuzz.harness import KNOWN_IDS, PAYLOAD_LIMIT
from sandboxd.contract.v1 import sandbox_pb2 as pb


def mostly(valid: st.SearchStrategy[Any], wild: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """About five draws in six from ``valid``: a request with every field
    wild only ever meets validation; one wild field among valid ones reaches
    the code behind it."""
    # Not one_of(valid, valid, ..., wild): hypothesis merges equal branches.
    return st.sampled_from(range(6)).flatmap(lambda i: wild if i == 5 else valid)


INT64 = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, -(2**63), 999, 1000, 600_001]),
    st.integers(-5, 5000),
)
UINT32 = st.integers(0, 2**32 - 1)
TEXT = st.text(max_size=40)
# Unicode with surrogates excluded (protobuf strings must be valid UTF-8).
WILD_TEXT = st.one_of(
    TEXT,
    st.text(st.characters(codec="utf-8"), max_size=60),
    st.sampled_from(["", "\x00", "a\x00b", "\u202e", "\ufeff", "💥" * 50, " " * 10, "\n"]),
    st.just("x" * 5000),
)

# --------------------------------------------------------------- instance ids

VALID_ID = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,20}\Z")
#: Ids that CreateSandbox and DeleteSandbox both aim at, so deletes find something.
#: Lifetimes: never a few seconds, which would end the seeded sandboxes mid-run;
#: zero, negative and past every ceiling instead.
LONG_SECONDS = st.one_of(
    st.integers(3600, 10**7), st.sampled_from([0, -1, 2**31, 2**63 - 1, -(2**63)])
)
SPARE_IDS = st.sampled_from(["fz-c", "fz-d"])
_OTHER_IDS = st.one_of(
    SPARE_IDS,
    VALID_ID,
    WILD_TEXT,
    st.sampled_from(["-x", ".x", "a" * 128, "a" * 129, "fz-a/..", "../fz-a", "fz a"]),
)
INSTANCE_IDS = mostly(st.sampled_from(KNOWN_IDS), _OTHER_IDS)
#: Ids DeleteSandbox may get: never the known instances, which other tests use.
DELETABLE_IDS = mostly(SPARE_IDS, _OTHER_IDS.filter(lambda i: i not in KNOWN_IDS))

# --------------------------------------------------------------------- paths

_SEGMENT = st.text(
    st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=12
).filter(lambda s: s not in (".", ".."))
_RELATIVE = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)
#: Values validation must refuse before touching anything.
_REFUSED = st.sampled_from(["", "\x00", "a\x00b", "x" * 5000, "dir/\x00/x"])
#: Names the harness creates in every known instance, so reads find files.
COMMON = st.sampled_from(["f.txt", "dir/f.txt", "dir", ".", "a b/ü.txt", "dir/sub/deep.txt"])
SAFE_PATHS = mostly(COMMON, st.one_of(_RELATIVE, _REFUSED))
READ_PATHS = mostly(
    SAFE_PATHS,
    st.one_of(
        st.sampled_from(["..", "../..", "../../..", "/", "/etc/hostname", "/no/such/file", "/tmp"]),
        _RELATIVE.map(lambda p: f"../{p}"),
    ),
)

# ------------------------------------------------------------------ commands

COMMANDS = (
    "true",
    "false",
    "echo hello",
    "pwd",
    "ls",
    "exit 3",
    "printf 'no newline'",
    "echo out; echo err >&2",
    "seq 1 2000",
    "yes | head -c 100000",
    "printf '\\033[31mred\\033[0m\\r\\n'",
    "printf '\\377\\376 invalid utf-8'",
    "sleep 0.01",
    "cat no-such-file",
    "echo $HOME $PWD",
    "no-such-program-xyz",
    "echo a\x00b",  # a NUL never reaches bash (nothing can run it): a refusal
    # A tree deeper than PATH_MAX and Python's recursion limit (issue 15):
    # later grep, glob and remove calls walk it.
    'python3 -c \'import os\nfor i in range(2100):\n os.makedirs("deep", exist_ok=True);'
    ' os.chdir("deep")\' 2>&1 | tail -1',
)
ARGVS = mostly(
    st.sampled_from([["true"], ["echo", "a", "b"], ["ls", "-la"], ["pwd"], ["sleep", "0.01"]]),
    st.sampled_from([[], [""], ["no-such-program-xyz"], ["echo", "\x00"], ["\x00"]]),
)
ENV = mostly(
    st.one_of(st.just({}), st.dictionaries(st.from_regex(r"\A[A-Z_]{1,8}\Z"), TEXT, max_size=2)),
    st.dictionaries(WILD_TEXT, WILD_TEXT, max_size=3),
)
SMALL = mostly(st.integers(0, 4000), INT64)
TIMEOUT_MS = mostly(st.one_of(st.just(0), st.integers(1000, 20_000)), INT64)
CALL_ID = mostly(st.just(""), st.one_of(WILD_TEXT, st.just("x" * 300)))
OPT_CALL_ID = mostly(st.none(), st.one_of(WILD_TEXT, st.just("x" * 300)))
LABELS = mostly(
    st.dictionaries(
        st.from_regex(r"\A[a-z]{1,6}\Z"), st.from_regex(r"\A[a-z0-9]{0,6}\Z"), max_size=2
    ),
    st.dictionaries(WILD_TEXT, WILD_TEXT, max_size=3),
)

# --------------------------------------------------------------- lifecycle


def network_policy() -> st.SearchStrategy[pb.NetworkPolicy]:
    """Mostly good policies; modes a daemon does not know, rules that are not rules."""
    return st.builds(
        pb.NetworkPolicy,
        mode=mostly(st.sampled_from([0, 1, 2]), st.sampled_from([3, 4, 99])),
        allow=st.lists(mostly(st.sampled_from(["example.com", "*.a.test"]), WILD_TEXT), max_size=3),
        deny=st.lists(WILD_TEXT, max_size=2),
    )


def set_network_policy() -> st.SearchStrategy[pb.SetNetworkPolicyRequest]:
    return st.builds(pb.SetNetworkPolicyRequest, instance_id=INSTANCE_IDS, policy=network_policy())


def get_network_log() -> st.SearchStrategy[pb.GetNetworkLogRequest]:
    return st.builds(
        pb.GetNetworkLogRequest,
        instance_id=INSTANCE_IDS,
        limit=mostly(st.sampled_from([0, 1, 1000]), st.integers(-(2**31), 2**31 - 1)),
    )


#: Snapshot names: a few that CreateSnapshot makes and the others find, and bad ones.
SNAPSHOT_NAMES = mostly(st.sampled_from(["fz-s1", "fz-s2"]), _OTHER_IDS)


def create_snapshot() -> st.SearchStrategy[pb.CreateSnapshotRequest]:
    return st.builds(pb.CreateSnapshotRequest, instance_id=INSTANCE_IDS, name=SNAPSHOT_NAMES)


def restore_snapshot() -> st.SearchStrategy[pb.RestoreSnapshotRequest]:
    # Never onto the known instances: their seeded files are other RPCs' to find.
    return st.builds(pb.RestoreSnapshotRequest, instance_id=DELETABLE_IDS, name=SNAPSHOT_NAMES)


def create_from_snapshot() -> st.SearchStrategy[pb.CreateFromSnapshotRequest]:
    return st.builds(
        pb.CreateFromSnapshotRequest, name=SNAPSHOT_NAMES, new_id=DELETABLE_IDS, options=options()
    )


def options() -> st.SearchStrategy[pb.SandboxOptions]:
    return st.builds(
        pb.SandboxOptions,
        image=mostly(st.just(""), WILD_TEXT),
        env=ENV,
        workdir=mostly(
            st.sampled_from(["", "/workspace", "/workspace/sub"]),
            st.one_of(
                st.sampled_from(["/", "/etc", "workspace", "/workspace/../etc"]),
                WILD_TEXT.filter(lambda w: ".." not in w),
            ),
        ),
        memory_bytes=mostly(st.just(0), INT64),
        cpus=mostly(st.just(0.0), st.floats(allow_nan=True, allow_infinity=True)),
        pids_limit=mostly(st.just(0), INT64),
        network=st.one_of(st.none(), network_policy()),
        runtime=mostly(st.sampled_from([0, 1]), st.sampled_from([2, 3, 99])),
        labels=LABELS,
        idle_ttl_seconds=mostly(st.just(0), INT64),
        max_lifetime_seconds=mostly(st.just(0), LONG_SECONDS),
        delete_after_stopped_seconds=mostly(st.just(0), INT64),
        disk_bytes=mostly(st.just(0), INT64),
        secrets=st.lists(SECRETS, max_size=3),
    )


#: Secrets: env ones mostly; file ones only with paths validation refuses (the
#: fuzz daemon's local backend would write a valid absolute path on the host).
SECRETS = st.builds(
    pb.Secret,
    name=mostly(st.sampled_from(["TOKEN", "KEY_2"]), WILD_TEXT),
    value=mostly(st.sampled_from(["v-1", "Bearer x"]), WILD_TEXT),
    hosts=st.lists(mostly(st.sampled_from(["api.test", "*.b.test"]), WILD_TEXT), max_size=3),
    env=mostly(st.sampled_from(["TOKEN", "T2"]), WILD_TEXT),
    file=st.sampled_from(["", "", "", "rel/x", "/a/../b", "/a\x00b"]),
)


def extend_sandbox() -> st.SearchStrategy[pb.ExtendSandboxRequest]:
    return st.builds(pb.ExtendSandboxRequest, instance_id=INSTANCE_IDS, seconds=LONG_SECONDS)


def create_sandbox() -> st.SearchStrategy[pb.CreateSandboxRequest]:
    return st.builds(
        pb.CreateSandboxRequest,
        instance_id=st.one_of(INSTANCE_IDS, SPARE_IDS),
        options=st.one_of(st.none(), options()),
    )


def get_sandbox() -> st.SearchStrategy[pb.GetSandboxRequest]:
    return st.builds(pb.GetSandboxRequest, instance_id=INSTANCE_IDS)


def list_sandboxes() -> st.SearchStrategy[pb.ListSandboxesRequest]:
    return st.builds(pb.ListSandboxesRequest, label_selector=LABELS)


def delete_sandbox() -> st.SearchStrategy[pb.DeleteSandboxRequest]:
    return st.builds(pb.DeleteSandboxRequest, instance_id=DELETABLE_IDS)


# --------------------------------------------------------------------- files

DATA = mostly(
    st.binary(max_size=300),
    st.one_of(st.just(b"x" * (PAYLOAD_LIMIT + 1)), st.just(b"\x00\xff" * 1000)),
)


def read_file() -> st.SearchStrategy[pb.ReadFileRequest]:
    return st.builds(
        pb.ReadFileRequest,
        instance_id=INSTANCE_IDS,
        path=READ_PATHS,
        offset=SMALL,
        length=st.one_of(st.none(), SMALL),
    )


def write_file() -> st.SearchStrategy[pb.WriteFileRequest]:
    return st.builds(
        pb.WriteFileRequest,
        instance_id=INSTANCE_IDS,
        path=SAFE_PATHS,
        data=DATA,
        create_parents=st.booleans(),
        expected_sha256=mostly(
            st.one_of(st.none(), st.just("absent")),
            st.one_of(st.text("0123456789abcdef", min_size=64, max_size=64), WILD_TEXT),
        ),
        mode=mostly(
            st.one_of(st.none(), st.sampled_from([0o644, 0o600, 0o755])),
            st.one_of(UINT32, st.sampled_from([0o7777, 0o10000])),
        ),
    )


def stat() -> st.SearchStrategy[pb.StatRequest]:
    return st.builds(
        pb.StatRequest, instance_id=INSTANCE_IDS, path=READ_PATHS, follow_symlinks=st.booleans()
    )


def list_dir() -> st.SearchStrategy[pb.ListDirRequest]:
    return st.builds(pb.ListDirRequest, instance_id=INSTANCE_IDS, path=READ_PATHS)


def exists() -> st.SearchStrategy[pb.ExistsRequest]:
    return st.builds(pb.ExistsRequest, instance_id=INSTANCE_IDS, path=READ_PATHS)


def make_dir() -> st.SearchStrategy[pb.MakeDirRequest]:
    return st.builds(
        pb.MakeDirRequest,
        instance_id=INSTANCE_IDS,
        path=SAFE_PATHS,
        parents=st.booleans(),
        exist_ok=st.booleans(),
    )


def remove() -> st.SearchStrategy[pb.RemoveRequest]:
    # "." is left out: removing the workdir itself is legal and would only
    # make every later example of the run answer NOT_FOUND.
    return st.builds(
        pb.RemoveRequest,
        instance_id=INSTANCE_IDS,
        path=SAFE_PATHS.filter(lambda p: p not in (".", "")),
        recursive=st.booleans(),
        missing_ok=st.booleans(),
    )


# ---------------------------------------------------------------------- exec


@st.composite
def exec_request(draw: st.DrawFn) -> pb.ExecRequest:
    request = pb.ExecRequest(
        instance_id=draw(INSTANCE_IDS),
        cwd=draw(mostly(st.sampled_from(["", ".", "dir"]), READ_PATHS)),
        env=draw(ENV),
        stdin=draw(
            mostly(st.one_of(st.just(b""), st.binary(max_size=100)), st.just(b"y" * 70_000))
        ),
        timeout_ms=draw(TIMEOUT_MS),
    )
    kind = draw(mostly(st.sampled_from(["argv", "shell"]), st.just("none")))
    if kind == "argv":
        request.argv.args.extend(draw(ARGVS))
    elif kind == "shell":
        request.shell = draw(mostly(st.sampled_from(COMMANDS), st.sampled_from(["", "\x00"])))
    return request


def exec_stream() -> st.SearchStrategy[pb.ExecStreamRequest]:
    return exec_request().map(lambda r: pb.ExecStreamRequest(exec=r))


# --------------------------------------------------------------------- tools

TOOL_NAMES = ("read", "write", "edit", "bash", "grep", "glob")
_SAFE_STRING = st.one_of(SAFE_PATHS, TEXT.filter(lambda s: ".." not in s and "/" not in s))
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        _SAFE_STRING,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_SAFE_STRING, inner, max_size=3)
    ),
    max_leaves=8,
)
#: The keys each tool knows, so that random values reach real code paths.
TOOL_KEYS = {
    "read": ("file_path", "offset", "limit"),
    "write": ("file_path", "content"),
    "edit": ("file_path", "old_string", "new_string", "replace_all"),
    "bash": ("timeout", "description", "run_in_background", "workdir"),
    "grep": ("pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C",
             "multiline", "literal", "head_limit", "offset"),
    "glob": ("pattern", "path", "head_limit", "offset", "no_ignore"),
}  # fmt: skip
_PATH_KEYS = ("file_path", "path", "workdir")


@st.composite
def tool_arguments(draw: st.DrawFn, name: str) -> dict[str, Any]:
    keys = TOOL_KEYS.get(name, ())
    args: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(keys), unique=True)) if keys else ():
        args[key] = draw(SAFE_PATHS if key in _PATH_KEYS else JSON_VALUES)
    # Unknown keys: their values are never paths or commands, whatever they alias.
    for key in draw(st.lists(st.text(max_size=10), max_size=2)):
        if key not in args and key != "command":
            args[key] = draw(st.one_of(st.none(), st.booleans(), st.integers()))
    if name == "bash":
        args["command"] = draw(st.sampled_from(COMMANDS))
    return args


@st.composite
def call_tool(draw: st.DrawFn) -> pb.CallToolRequest:
    name = draw(mostly(st.sampled_from(TOOL_NAMES), WILD_TEXT))
    if name in TOOL_NAMES:
        arguments = json.dumps(draw(tool_arguments(name)))
    else:
        arguments = draw(st.one_of(st.just("{}"), st.just("")))
    # Malformed JSON is refused before any tool runs, whatever the name.
    arguments = draw(
        mostly(
            st.just(arguments),
            st.one_of(
                st.sampled_from(["[]", "null", "1", "{", '{"a":', "\x00", "NaN", '"x"']),
                st.just('{"content": "' + "x" * (PAYLOAD_LIMIT + 10) + '"}'),
                # Lone surrogates (valid JSON escapes, not valid Unicode) in
                # any string, key or value.
                st.sampled_from(
                    [
                        '{"file_path": "d/s\\ud800x"}',
                        '{"pattern": "\\udfff", "path": "."}',
                        '{"\\udc80": 1}',
                        '{"command": "echo \\ud83d"}',
                        '{"file_path": "f.txt", "content": "\\ud800\\ud800"}',
                    ]
                ),
                # Nesting past the stated depth, and past the parser's own limit.
                st.sampled_from([65, 200, 5_000]).map(
                    lambda n: '{"file_path": "f.txt", "x": ' + "[" * n + "]" * n + "}"
                ),
                st.just('{"x": ' + "[" * 100_000),
            ),
        )
    )
    return pb.CallToolRequest(
        instance_id=draw(INSTANCE_IDS),
        name=name,
        arguments_json=arguments,
        tool_call_id=draw(CALL_ID),
    )


def _opt(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


def _typed(message: Any, **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A typed tool request; a field drawn as None stays unset (proto3 optional)."""

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        values = {k: draw(v) for k, v in fields.items()}
        return message(**{k: v for k, v in values.items() if v is not None})

    return build()


def read() -> st.SearchStrategy[pb.ReadRequest]:
    return _typed(
        pb.ReadRequest,
        instance_id=INSTANCE_IDS,
        file_path=READ_PATHS,
        offset=_opt(SMALL),
        limit=_opt(SMALL),
        tool_call_id=OPT_CALL_ID,
    )


def write() -> st.SearchStrategy[pb.WriteRequest]:
    return _typed(
        pb.WriteRequest,
        instance_id=INSTANCE_IDS,
        file_path=SAFE_PATHS,
        content=mostly(WILD_TEXT, st.just("y" * (PAYLOAD_LIMIT + 1))),
        tool_call_id=OPT_CALL_ID,
    )


def edit() -> st.SearchStrategy[pb.EditRequest]:
    return _typed(
        pb.EditRequest,
        instance_id=INSTANCE_IDS,
        file_path=SAFE_PATHS,
        old_string=WILD_TEXT,
        new_string=WILD_TEXT,
        replace_all=st.booleans(),
        tool_call_id=OPT_CALL_ID,
    )


def bash() -> st.SearchStrategy[pb.BashRequest]:
    return _typed(
        pb.BashRequest,
        instance_id=INSTANCE_IDS,
        command=st.sampled_from(COMMANDS),
        timeout=_opt(mostly(st.integers(1000, 20_000), INT64)),
        description=_opt(WILD_TEXT),
        run_in_background=st.booleans(),
        workdir=_opt(SAFE_PATHS),
        tool_call_id=OPT_CALL_ID,
    )


def grep() -> st.SearchStrategy[pb.GrepRequest]:
    return _typed(
        pb.GrepRequest,
        instance_id=INSTANCE_IDS,
        pattern=mostly(
            st.sampled_from(["x", "line", ".*", "^f", "a|b"]),
            st.one_of(WILD_TEXT, st.sampled_from(["(", "[a-", "a{99999}", "\\"])),
        ),
        path=_opt(SAFE_PATHS),
        glob=_opt(WILD_TEXT),
        type=_opt(st.one_of(WILD_TEXT, st.sampled_from(["py", "rust", "js"]))),
        output_mode=_opt(
            st.one_of(st.sampled_from(["files_with_matches", "content", "count"]), WILD_TEXT)
        ),
        case_insensitive=st.booleans(),
        line_numbers=_opt(st.booleans()),
        after_context=_opt(SMALL),
        before_context=_opt(SMALL),
        context=_opt(SMALL),
        multiline=st.booleans(),
        literal=st.booleans(),
        head_limit=_opt(SMALL),
        offset=_opt(SMALL),
        tool_call_id=OPT_CALL_ID,
    )


def glob() -> st.SearchStrategy[pb.GlobRequest]:
    return _typed(
        pb.GlobRequest,
        instance_id=INSTANCE_IDS,
        pattern=mostly(
            st.sampled_from(["**", "**/*", "*.txt", "{a,b}*", "dir/**/*.txt"]),
            st.one_of(WILD_TEXT, st.just("[")),
        ),
        path=_opt(SAFE_PATHS),
        head_limit=_opt(SMALL),
        offset=_opt(SMALL),
        no_ignore=st.booleans(),
        tool_call_id=OPT_CALL_ID,
    )


#: RPC name -> strategy of its request; GetStatus has nothing to vary.
RPCS: dict[str, st.SearchStrategy[Any]] = {
    "CreateSandbox": create_sandbox(),
    "GetSandbox": get_sandbox(),
    "ListSandboxes": list_sandboxes(),
    "DeleteSandbox": delete_sandbox(),
    "GetStatus": st.just(pb.GetStatusRequest()),
    "ReadFile": read_file(),
    "WriteFile": write_file(),
    "Stat": stat(),
    "ListDir": list_dir(),
    "Exists": exists(),
    "MakeDir": make_dir(),
    "Remove": remove(),
    "Exec": exec_request(),
    "ExecStream": exec_stream(),
    "CallTool": call_tool(),
    "Read": read(),
    "Write": write(),
    "Edit": edit(),
    "Bash": bash(),
    "Grep": grep(),
    "Glob": glob(),
    "ExtendSandbox": extend_sandbox(),
    "SetNetworkPolicy": set_network_policy(),
    "GetNetworkLog": get_network_log(),
    "CreateSnapshot": create_snapshot(),
    "ListSnapshots": st.just(pb.ListSnapshotsRequest()),
    "DeleteSnapshot": st.builds(pb.DeleteSnapshotRequest, name=SNAPSHOT_NAMES),
    "RestoreSnapshot": restore_snapshot(),
    "CreateFromSnapshot": create_from_snapshot(),
}

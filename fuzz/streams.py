"""Request strategies for the RPCs that stream or start long-lived things:
processes, transfers, fork and ToolCalls (issue 23's "must show").

A client-streaming or bidirectional RPC's strategy draws the whole list of
messages the client sends (then it half-closes); the harness sends them.
The safety rules of ``fuzz.strategies`` hold: mutating paths are safe ones,
commands come from ``COMMANDS`` (short-lived), a tree download never names
a host folder that is large or endless.
"""

from __future__ import annotations

import io
import tarfile
from typing import Any

from hypothesis import strategies as st

from fuzz.harness import KNOWN_IDS
from fuzz.strategies import (
    ARGVS,
    COMMANDS,
    ENV,
    INSTANCE_IDS,
    INT64,
    READ_PATHS,
    RPCS,
    SAFE_PATHS,
    SPARE_IDS,
    UINT32,
    WILD_TEXT,
    call_tool,
    mostly,
    options,
)
from sandboxd.contract.v1 import sandbox_pb2 as pb

INT32 = st.integers(-(2**31), 2**31 - 1)
HANDLES = mostly(
    st.sampled_from(["proc_1", "proc_2", "proc_3", "proc_10"]),
    st.one_of(WILD_TEXT, st.sampled_from(["proc_", "proc_-1", "proc_99999999999999999999"])),
)
TREE_PATHS = mostly(
    st.sampled_from(["dir", ".", "a b"]),
    st.one_of(SAFE_PATHS, st.sampled_from(["..", "/no/such/dir", "f.txt"])),
)

# ---------------------------------------------------------------- processes


@st.composite
def start_process(draw: st.DrawFn) -> pb.StartProcessRequest:
    request = pb.StartProcessRequest(
        instance_id=draw(INSTANCE_IDS),
        cwd=draw(mostly(st.sampled_from(["", "dir"]), SAFE_PATHS)),
        env=draw(ENV),
    )
    kind = draw(mostly(st.sampled_from(["argv", "shell"]), st.just("none")))
    if kind == "argv":
        request.argv.args.extend(draw(ARGVS))
    elif kind == "shell":
        request.shell = draw(st.sampled_from(COMMANDS))
    if draw(st.booleans()):
        request.pty.rows = draw(mostly(st.integers(1, 200), INT32))
        request.pty.cols = draw(mostly(st.integers(1, 400), INT32))
    return request


@st.composite
def connect_process(draw: st.DrawFn) -> list[pb.ProcessInput]:
    first = pb.ProcessInput(instance_id=draw(INSTANCE_IDS), handle=draw(HANDLES))
    offset = draw(st.one_of(st.none(), mostly(st.integers(0, 5000), INT64)))
    if offset is not None:
        first.offset = offset
    rest = draw(
        st.lists(
            st.builds(pb.ProcessInput, data=st.binary(max_size=64), close_stdin=st.booleans()),
            max_size=3,
        )
    )
    # Wild: a second message naming a process, or none naming one at all.
    return draw(mostly(st.just([first, *rest]), st.just(rest or [pb.ProcessInput()])))


def resize_process() -> st.SearchStrategy[pb.ResizeProcessRequest]:
    return st.builds(
        pb.ResizeProcessRequest,
        instance_id=INSTANCE_IDS,
        handle=HANDLES,
        size=st.builds(pb.TerminalSize, rows=INT32, cols=INT32),
    )


def signal_process() -> st.SearchStrategy[pb.SignalProcessRequest]:
    return st.builds(
        pb.SignalProcessRequest,
        instance_id=INSTANCE_IDS,
        handle=HANDLES,
        signal=mostly(st.sampled_from([2, 9, 15, 19, 18]), INT32),
    )


def list_processes() -> st.SearchStrategy[pb.ListProcessesRequest]:
    return st.builds(pb.ListProcessesRequest, instance_id=INSTANCE_IDS)


# ---------------------------------------------------------------- transfers


def _tar(entries: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in entries:
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return out.getvalue()


TARS = mostly(
    st.lists(
        st.tuples(st.sampled_from(["t.txt", "sub/t.txt", "x y.txt"]), st.binary(max_size=50)),
        max_size=3,
    ).map(_tar),
    st.one_of(
        st.binary(max_size=2000),
        st.just(_tar([("../escape.txt", b"x")])),
        st.just(_tar([("/abs.txt", b"x")])),
        st.just(_tar([("t.txt", b"x")])[:700]),  # cut short
    ),
)


@st.composite
def upload(draw: st.DrawFn) -> list[pb.UploadRequest]:
    header = pb.UploadHeader(
        instance_id=draw(INSTANCE_IDS),
        path=draw(SAFE_PATHS),
        create_parents=draw(st.booleans()),
    )
    expected = draw(st.one_of(st.none(), st.sampled_from(["absent", "0" * 64]), WILD_TEXT))
    if expected is not None:
        header.expected_sha256 = expected
    mode = draw(st.one_of(st.none(), mostly(st.sampled_from([0o644, 0o755]), UINT32)))
    if mode is not None:
        header.mode = mode
    chunks = draw(st.lists(st.binary(max_size=200), max_size=4))
    messages = [pb.UploadRequest(header=header), *(pb.UploadRequest(data=c) for c in chunks)]
    wild = st.sampled_from(
        [
            [],
            [pb.UploadRequest(data=b"no header")],
            [pb.UploadRequest(header=header), pb.UploadRequest(header=header)],
        ]
    )
    return draw(mostly(st.just(messages), wild))


def download() -> st.SearchStrategy[pb.DownloadRequest]:
    @st.composite
    def build(draw: st.DrawFn) -> pb.DownloadRequest:
        request = pb.DownloadRequest(
            instance_id=draw(INSTANCE_IDS),
            path=draw(READ_PATHS),
            offset=draw(mostly(st.integers(0, 100), INT64)),
        )
        length = draw(st.one_of(st.none(), mostly(st.integers(0, 100), INT64)))
        if length is not None:
            request.length = length
        return request

    return build()


@st.composite
def upload_tree(draw: st.DrawFn) -> list[pb.UploadTreeRequest]:
    header = pb.UploadTreeHeader(instance_id=draw(INSTANCE_IDS), path=draw(SAFE_PATHS))
    data = draw(TARS)
    cut = draw(st.integers(1, 4))
    step = max(1, len(data) // cut)
    parts = [data[i : i + step] for i in range(0, len(data), step)]
    messages = [pb.UploadTreeRequest(header=header), *(pb.UploadTreeRequest(data=p) for p in parts)]
    wild = st.sampled_from([[], [pb.UploadTreeRequest(data=data)]])
    return draw(mostly(st.just(messages), wild))


def download_tree() -> st.SearchStrategy[pb.DownloadTreeRequest]:
    return st.builds(
        pb.DownloadTreeRequest,
        instance_id=INSTANCE_IDS,
        path=TREE_PATHS,
        gitignore=st.booleans(),
    )


# --------------------------------------------------------------- fork, ToolCalls


def fork_sandbox() -> st.SearchStrategy[pb.ForkSandboxRequest]:
    return st.builds(
        pb.ForkSandboxRequest,
        source_id=INSTANCE_IDS,
        # Never onto the known instances (AlreadyExists is fine, but other
        # RPCs' examples rely on them); the spare ids are what deletes remove.
        new_id=mostly(SPARE_IDS, st.one_of(WILD_TEXT, st.sampled_from(list(KNOWN_IDS)))),
        options=options(),
    )


_CALL_IDS = mostly(st.integers(1, 50), st.integers(0, 2**64 - 1))


def _tool_call_request() -> st.SearchStrategy[pb.ToolCallsRequest]:
    return st.one_of(
        st.builds(pb.ToolCallsRequest, call_id=_CALL_IDS, call=call_tool()),
        st.builds(pb.ToolCallsRequest, call_id=_CALL_IDS, cancel=st.booleans()),
        st.builds(pb.ToolCallsRequest, call_id=_CALL_IDS),  # no body
    )


def tool_calls() -> st.SearchStrategy[list[pb.ToolCallsRequest]]:
    one = _tool_call_request()
    batch = st.lists(one, min_size=1, max_size=4).map(lambda r: pb.ToolCallsRequest(batch=r))
    nested = batch.map(lambda b: pb.ToolCallsRequest(batch=[b]))
    return st.lists(mostly(one, st.one_of(batch, nested)), max_size=5)


# --------------------------------------------------------------- ports

#: Ports where nothing of the host listens (the local backend's loopback is
#: the host's), and out-of-range ones.
_PORTS = mostly(st.sampled_from([1, 9, 65535]), st.sampled_from([0, 65536, 2**32 - 1]))
_PORT_HOSTS = mostly(st.sampled_from(["", "localhost", "127.0.0.1", "::1"]), WILD_TEXT)
_CONN_IDS = mostly(st.integers(1, 4), st.integers(0, 2**64 - 1))


def _port_input() -> st.SearchStrategy[pb.PortInput]:
    return st.builds(
        pb.PortInput,
        instance_id=INSTANCE_IDS,
        port=_PORTS,
        host=_PORT_HOSTS,
        data=mostly(st.binary(max_size=64), st.just(b"d" * 300_000)),
        close_write=st.booleans(),
        compact=st.booleans(),
    )


def open_ports() -> st.SearchStrategy[list[pb.PortsInput]]:
    one = st.one_of(
        st.builds(pb.PortsInput, conn_id=_CONN_IDS, open=_port_input(), window=UINT32),
        st.builds(
            pb.PortsInput,
            conn_id=_CONN_IDS,
            data=mostly(st.binary(max_size=64), st.just(b"x" * 600_000)),
        ),
        st.builds(pb.PortsInput, conn_id=_CONN_IDS, close_write=st.booleans()),
        st.builds(pb.PortsInput, conn_id=_CONN_IDS, reset=st.booleans()),
        st.builds(pb.PortsInput, conn_id=_CONN_IDS, window=UINT32),
    )
    return st.lists(one, max_size=6)


#: RPC name -> strategy; with the unary ones, every RPC of the service.
STREAM_RPCS: dict[str, st.SearchStrategy[Any]] = {
    "StartProcess": start_process(),
    "ConnectProcess": connect_process(),
    "ResizeProcess": resize_process(),
    "SignalProcess": signal_process(),
    "ListProcesses": list_processes(),
    "Upload": upload(),
    "Download": download(),
    "UploadTree": upload_tree(),
    "DownloadTree": download_tree(),
    "ForkSandbox": fork_sandbox(),
    "ToolCalls": tool_calls(),
    "OpenPorts": open_ports(),
}
ALL_RPCS: dict[str, st.SearchStrategy[Any]] = {**RPCS, **STREAM_RPCS}

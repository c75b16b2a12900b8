"""Input that used to wedge an instance or end in INTERNAL (issue 15): FIFOs in
every file tool, lone surrogates, deep nesting and trees deeper than PATH_MAX,
under runc and gVisor."""

from __future__ import annotations

import asyncio
import time

import anyio
import grpc
import pytest

from runtime_client import InvalidArgument, Sandbox
from sandboxd.contract.v1 import sandbox_pb2 as pb
from sandboxd.contract.v1 import sandbox_pb2_grpc as pb_grpc
from sandboxd.contract.validation import MAX_JSON_DEPTH
from tests.helpers import Daemon
from tests.hostile.support import assert_serving

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(300)]

FIFO_CALLS = 300


async def test_fifo_calls_get_typed_errors_and_reads_keep_answering(
    daemon: Daemon, box: Sandbox
) -> None:
    await box.write_file("ok.txt", "fine\n")
    await box.exec("mkfifo p && mkdir tree && mkfifo tree/q && echo needle > tree/f.txt")

    async def one(n: int) -> str:
        kind = n % 5
        try:
            if kind == 0:
                result = await box.read("p")
            elif kind == 1:
                result = await box.edit("p", "a", "b")
            elif kind == 2:
                result = await box.grep("x", path="p")
            elif kind == 3:
                result = await box.write("p", "x")
            else:
                await box.read_file("p")
                return "verb answered"
        except InvalidArgument as exc:
            return f"typed: {exc}"
        assert result.is_error, result.text
        return result.text

    started = time.monotonic()
    answers = await asyncio.gather(*(one(n) for n in range(FIFO_CALLS)))
    fifo_s = time.monotonic() - started
    assert all("not a regular file" in a or "named pipe" in a for a in answers), {
        a for a in answers if "regular" not in a
    }
    began = time.monotonic()
    read = await box.read("ok.txt")
    read_s = time.monotonic() - began
    assert read.text.endswith("fine") and not read.is_error, read.text
    # A walk over a folder with a FIFO in it skips the FIFO and finds the file.
    grep = await box.grep("needle", path="tree")
    assert "tree/f.txt" in grep.text and not grep.is_error, grep.text
    glob = await box.glob("tree/*")
    assert "tree/f.txt" in glob.text, glob.text
    await assert_serving(daemon.target)
    print(f"\nFIFO: {FIFO_CALLS} calls answered in {fifo_s:.2f} s; next read in {read_s:.3f} s")


async def test_bad_input_gets_invalid_argument(daemon: Daemon, box: Sandbox) -> None:
    with pytest.raises(InvalidArgument, match="surrogate"):
        await box.call_tool("read", {"file_path": "d/s\ud800x"})
    nested: object = {}
    for _ in range(MAX_JSON_DEPTH + 1):
        nested = {"x": nested}
    with pytest.raises(InvalidArgument, match="nests deeper"):
        await box.call_tool("read", {"file_path": "a", "extra": nested})
    # 5,000 levels and 100k "[": sent as raw text, as a broken client would.
    # A blocking channel in a thread: a grpc.aio channel opened here would
    # outlive this test's event loop and fail the next test's setup.
    codes = await anyio.to_thread.run_sync(_raw_call_tool_codes, daemon.target, box.instance_id)
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT] * 3, codes
    assert (await box.bash("echo still here")).text.startswith("still here")


def _raw_call_tool_codes(target: str, instance_id: str) -> list[grpc.StatusCode]:
    codes = []
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.SandboxServiceStub(channel)  # type: ignore[no-untyped-call]
        for raw in (
            '{"file_path": "a", "x": ' + "[" * 5000 + "]" * 5000 + "}",
            '{"file_path": "a", "x": ' + "[" * 100_000,
            '{"file_path": "d/s\\ud800x"}',
        ):
            try:
                stub.CallTool(
                    pb.CallToolRequest(instance_id=instance_id, name="read", arguments_json=raw)
                )
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as exc:
                codes.append(exc.code())
    return codes


async def test_deep_trees_give_results_or_a_bounded_error(box: Sandbox) -> None:
    made = await box.exec(
        'python3 -c \'import os\nfor i in range(3000):\n os.mkdir("a"); os.chdir("a")\n'
        'open("deep.txt", "w").write("needle\\n")\'',
        timeout_ms=120_000,
    )
    assert made.exit_code == 0, made.stderr
    await box.write_file("top.txt", "needle\n")
    glob = await box.glob("**/*.txt")
    assert "top.txt" in glob.text and "path length limit" in glob.text, glob.text
    # The shallow match is found and the deep one reported as not searched,
    # or (gVisor resolves each of the 3,000 levels on every open: slow) the
    # search stops at its time limit and says it is incomplete; never
    # "No matches".
    for grep in (await box.grep("needle"), await box.grep("needle", glob="deep.txt")):
        assert "No matches" not in grep.text, grep.text
        complete = "path length limit" in grep.text
        assert complete or (grep.is_error and "incomplete" in grep.text), grep.text
        if complete:
            assert grep.fields.get("too_deep") == 1, grep.fields

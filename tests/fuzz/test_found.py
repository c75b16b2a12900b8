"""Inputs the fuzzer found answering INTERNAL, kept as fixed examples: a
random run may not draw them again. Each was xfail(strict) until its fix
landed (SECURITY.md, "RPC fuzzing")."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("hypothesis")  # the harness module comes with the fuzz package

from fuzz.harness import FuzzServer
from sandboxd.contract.v1 import sandbox_pb2 as pb

pytestmark = [pytest.mark.inproc]

NUL_ARGUMENTS = [
    pytest.param("grep", {"pattern": "x", "glob": "\x00"}, id="grep-glob"),
    pytest.param("grep", {"pattern": "x\x00"}, id="grep-pattern"),
    pytest.param("bash", {"command": "echo a\x00b"}, id="bash-command"),
]


@pytest.mark.parametrize(("tool", "arguments"), NUL_ARGUMENTS)
def test_a_nul_in_tool_arguments_is_an_is_error_result(
    fuzz_server: FuzzServer, tool: str, arguments: dict[str, str]
) -> None:
    request = pb.CallToolRequest(
        instance_id="fz-a", name=tool, arguments_json=json.dumps(arguments)
    )
    reply = fuzz_server.call("CallTool", request)
    assert reply.is_error and "NUL" in reply.text

"""OpenAIChatModel: the Chat Completions request and response mapping, with no network.

The request shape follows the Chat Completions reference: ``messages`` with
roles system / user / assistant (``tool_calls`` of ``{"id", "type":
"function", "function": {"name", "arguments": <JSON text>}}``) / tool
(``tool_call_id``, ``content``), and ``tools`` of function tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from runtime_client import (
    Agent,
    AssistantMessage,
    ModelError,
    ModelRequest,
    OpenAIChatModel,
    ToolCall,
    ToolCallResult,
    ToolContext,
    ToolResultsMessage,
    ToolSpec,
    UserMessage,
    define_tool,
)

pytestmark = [pytest.mark.unit, pytest.mark.anyio]


class FakeTransport:
    """Answers each POST with the next canned reply and keeps what was sent."""

    def __init__(self, *replies: tuple[int, Any]) -> None:
        self.replies = list(replies)
        self.sent: list[dict[str, Any]] = []

    async def post_json(
        self, url: str, headers: Mapping[str, str], body: Mapping[str, Any], timeout: float
    ) -> tuple[int, Any]:
        # Through JSON, as the wire would: anything not serialisable fails here.
        self.sent.append(
            {"url": url, "headers": dict(headers), "body": json.loads(json.dumps(body))}
        )
        return self.replies.pop(0)


def completion(message: dict[str, Any]) -> tuple[int, Any]:
    return 200, {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}
        ],
    }


SPEC = ToolSpec(
    "echo",
    "Echo.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


async def test_request_mapping() -> None:
    transport = FakeTransport(completion({"content": "hi"}))
    model = OpenAIChatModel(
        "gpt-test",
        base_url="http://llm.invalid/v1/",
        api_key="sk-test",
        transport=transport,
        extra_body={"temperature": 0},
    )
    call = ToolCall("call_a", "echo", {"text": "x"})
    request = ModelRequest(
        "Be brief.",
        (
            UserMessage("Say x"),
            AssistantMessage("", (call, ToolCall("call_b", "echo", '{"text": "y"'))),
            ToolResultsMessage(
                (
                    ToolCallResult("call_a", "echo", "X"),
                    ToolCallResult("call_b", "echo", "Error: bad", is_error=True),
                )
            ),
            AssistantMessage("Done."),
            UserMessage("Again"),
        ),
        (SPEC,),
    )
    response = await model.complete(request)
    assert response.text == "hi"
    (sent,) = transport.sent
    assert sent["url"] == "http://llm.invalid/v1/chat/completions"
    assert sent["headers"]["Authorization"] == "Bearer sk-test"
    assert sent["body"] == {
        "model": "gpt-test",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "echo", "arguments": '{"text": "x"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        # Text the model sent is sent back exactly, even when broken.
                        "function": {"name": "echo", "arguments": '{"text": "y"'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "X"},
            {"role": "tool", "tool_call_id": "call_b", "content": "Error: bad"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Again"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "echo",
                    "description": "Echo.",
                    "parameters": dict(SPEC.parameters),
                },
            }
        ],
    }


async def test_no_tools_and_no_key_mean_neither_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    transport = FakeTransport(completion({"content": "ok"}))
    await OpenAIChatModel("m", transport=transport).complete(ModelRequest("", (UserMessage("hi"),)))
    (sent,) = transport.sent
    assert "Authorization" not in sent["headers"]
    assert "tools" not in sent["body"]
    assert sent["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert sent["url"] == "https://api.openai.com/v1/chat/completions"


async def test_the_api_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    transport = FakeTransport(completion({"content": "ok"}))
    await OpenAIChatModel("m", transport=transport).complete(ModelRequest("", (UserMessage("hi"),)))
    assert transport.sent[0]["headers"]["Authorization"] == "Bearer sk-env"


async def test_response_mapping() -> None:
    model = OpenAIChatModel("m", transport=FakeTransport(), api_key="")
    response = model.parse_response(
        completion(
            {
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"file_path": "a.py"}'},
                    },
                    {"type": "function", "function": {"name": "bash", "arguments": "{oops"}},
                ],
            }
        )[1]
    )
    assert response.text == ""
    first, second = response.tool_calls
    assert (first.id, first.name, first.arguments) == ("call_1", "read", '{"file_path": "a.py"}')
    assert first.arguments_object() == {"file_path": "a.py"}
    # A missing id is filled in so the result can still be paired with its call.
    assert (second.name, second.arguments) == ("bash", "{oops")
    assert second.id.startswith("call_") and second.id != first.id


async def test_content_parts_are_joined() -> None:
    model = OpenAIChatModel("m", transport=FakeTransport(), api_key="")
    body = completion({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    assert model.parse_response(body[1]).text == "ab"


async def test_an_error_status_raises_model_error() -> None:
    transport = FakeTransport((429, {"error": {"message": "Rate limit reached", "type": "x"}}))
    model = OpenAIChatModel("m", transport=transport, api_key="")
    with pytest.raises(ModelError, match="answered 429: Rate limit reached") as caught:
        await model.complete(ModelRequest("", (UserMessage("hi"),)))
    assert caught.value.status == 429


async def test_a_reply_without_choices_raises_model_error() -> None:
    model = OpenAIChatModel("m", transport=FakeTransport((200, {"choices": []})), api_key="")
    with pytest.raises(ModelError, match=r"without choices\[0\].message"):
        await model.complete(ModelRequest("", (UserMessage("hi"),)))


async def test_an_agent_runs_on_the_adapter() -> None:
    async def echo(ctx: ToolContext[None]) -> str:
        return "pong"

    transport = FakeTransport(
        completion(
            {
                "content": None,
                "tool_calls": [
                    {"id": "c9", "type": "function", "function": {"name": "ping", "arguments": ""}}
                ],
            }
        ),
        completion({"content": "The tool said pong."}),
    )
    agent = Agent(
        model=OpenAIChatModel("m", transport=transport, api_key=""),
        instructions="Use ping.",
        tools=[define_tool(name="ping", description="Ping.", run=echo)],
    )
    run = await agent.run("ping it")
    assert run.text == "The tool said pong."
    second = transport.sent[1]["body"]["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "c9", "content": "pong"}
    assert second[-2]["tool_calls"][0]["function"] == {"name": "ping", "arguments": ""}


async def test_the_default_transport_speaks_http_through_httpx() -> None:
    httpx = pytest.importorskip("httpx")
    from runtime_client.openai_chat import HttpxTransport

    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return httpx.Response(200, json=completion({"content": "over http"})[1])

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    transport = HttpxTransport(client)
    model = OpenAIChatModel("m", base_url="http://llm.invalid/v1", api_key="k", transport=transport)
    response = await model.complete(ModelRequest("", (UserMessage("hi"),), (SPEC,)))
    await transport.aclose()
    assert response.text == "over http"
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == "http://llm.invalid/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k"
    assert json.loads(request.content)["tools"][0]["function"]["name"] == "echo"

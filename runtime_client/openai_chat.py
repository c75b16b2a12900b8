"""``OpenAIChatModel``: a ``ModelAdapter`` for OpenAI-compatible Chat Completions APIs.

Works with any server that speaks ``POST {base_url}/chat/completions`` with
function tools (OpenAI, vLLM, Ollama, LiteLLM...). HTTP goes through a small
``HttpTransport`` port; the default one needs httpx (``pip install
sandboxd[openai]``), imported only when a request is first sent, so
importing this module costs nothing and tests can pass a fake transport.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from typing import Any, Protocol

from runtime_client.model import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    ToolResultsMessage,
    UserMessage,
)
from runtime_client.runner import ToolCall
from runtime_client.schema import to_openai_chat_tools


class ModelError(RuntimeError):
    """The model API answered with an error (``status``) or with something unreadable."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class HttpTransport(Protocol):
    """POST a JSON body, return the status and the decoded JSON answer."""

    async def post_json(
        self, url: str, headers: Mapping[str, str], body: Mapping[str, Any], timeout: float
    ) -> tuple[int, Any]: ...


class HttpxTransport:
    """The default transport: an ``httpx.AsyncClient``, made on first use unless given."""

    def __init__(self, client: Any = None) -> None:
        self._client: Any = client

    async def post_json(
        self, url: str, headers: Mapping[str, str], body: Mapping[str, Any], timeout: float
    ) -> tuple[int, Any]:
        if self._client is None:
            try:
                import httpx
            except ImportError as exc:
                raise ImportError(
                    "OpenAIChatModel's default transport needs httpx: "
                    "pip install 'sandboxd[openai]'"
                ) from exc
            self._client = httpx.AsyncClient()
        reply = await self._client.post(url, headers=dict(headers), json=body, timeout=timeout)
        try:
            return reply.status_code, reply.json()
        except ValueError:
            return reply.status_code, reply.text

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


class OpenAIChatModel:
    """``model`` is the API's model name. ``api_key`` defaults to ``$OPENAI_API_KEY``
    (none is sent when empty, as local servers expect). ``extra_body`` is merged
    into every request (``temperature``, ``parallel_tool_calls``...)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        transport: HttpTransport | None = None,
        timeout: float = 120.0,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.transport: HttpTransport = transport or HttpxTransport()
        self.timeout = timeout
        self.extra_body = dict(extra_body or {})

    async def complete(self, request: ModelRequest) -> ModelResponse:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        status, body = await self.transport.post_json(
            self.url, headers, self.request_body(request), self.timeout
        )
        if status >= 400:
            raise ModelError(
                f"{self.url} answered {status}: {_error_message(body)}", status=status, body=body
            )
        return self.parse_response(body)

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of ``POST /chat/completions`` for ``request``."""
        messages: list[dict[str, Any]] = []
        if request.instructions:
            messages.append({"role": "system", "content": request.instructions})
        for message in request.messages:
            if isinstance(message, UserMessage):
                messages.append({"role": "user", "content": message.text})
            elif isinstance(message, AssistantMessage):
                entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
                if message.tool_calls:
                    entry["tool_calls"] = [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments_json()},
                        }
                        for call in message.tool_calls
                    ]
                messages.append(entry)
            elif isinstance(message, ToolResultsMessage):
                messages.extend(
                    {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content}
                    for result in message.results
                )
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = to_openai_chat_tools(request.tools)
        body.update(self.extra_body)
        return body

    def parse_response(self, body: Any) -> ModelResponse:
        """The ``ModelResponse`` in a Chat Completions answer."""
        try:
            message = body["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"{self.url} answered without choices[0].message", body=body) from None
        calls = []
        for raw in message.get("tool_calls") or []:
            function = raw.get("function") or {}
            arguments = function.get("arguments")
            calls.append(
                ToolCall(
                    # Some compatible servers omit ids; the reply must still pair up.
                    id=str(raw.get("id") or f"call_{secrets.token_hex(6)}"),
                    name=str(function.get("name", "")),
                    # Kept as text: JSON that does not parse is the model's error to see.
                    arguments=arguments if isinstance(arguments, str | dict) else "",
                )
            )
        return ModelResponse(text=_text(message.get("content")), tool_calls=tuple(calls))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some servers send
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _error_message(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", body["error"]))
    return str(body)[:500]

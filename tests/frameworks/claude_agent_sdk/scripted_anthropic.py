"""A scripted model behind the Anthropic Messages API, for Claude Code to talk to.

Claude Code (the CLI the Claude Agent SDK drives) takes its model from
``ANTHROPIC_BASE_URL``; pointed here, it gets each scripted turn in turn as a
streamed message (a tool call, or the final text) and every request it made is
kept, so a test can see the tools Claude Code offered and the results it sent
back. The test double of this tier, as openai-agents' ScriptedModel and
LangChain's fake chat model are for theirs.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolUse:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Text:
    text: str


Turn = ToolUse | Text


@dataclass
class ScriptedAnthropic:
    turns: Sequence[Turn]
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def tool_results(self) -> dict[str, dict[str, Any]]:
        """The tool results Claude Code sent back, by tool-use id (toolu_<turn>)."""
        results: dict[str, dict[str, Any]] = {}
        for request in self.requests:
            for message in request.get("messages", []):
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if block.get("type") == "tool_result":
                        results[block["tool_use_id"]] = block
        return results

    def _events(self, index: int, model: str) -> list[tuple[str, dict[str, Any]]]:
        turn = self.turns[index]
        if isinstance(turn, ToolUse):
            start: dict[str, Any] = {
                "type": "tool_use",
                "id": f"toolu_{index}",
                "name": turn.name,
                "input": {},
            }
            delta: dict[str, Any] = {
                "type": "input_json_delta",
                "partial_json": json.dumps(turn.arguments),
            }
            stop = "tool_use"
        else:
            start, delta, stop = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": turn.text},
                "end_turn",
            )
        message: dict[str, Any] = {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return [
            ("message_start", {"type": "message_start", "message": message}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": start},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]

    def answer(self, request: dict[str, Any]) -> bytes:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.turns):
            raise AssertionError(
                f"the model was asked {index + 1} times; {len(self.turns)} turns scripted"
            )
        events = self._events(index, str(request.get("model", "scripted")))
        return "".join(
            f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events
        ).encode()


@contextmanager
def serve(turns: Sequence[Turn]) -> Iterator[ScriptedAnthropic]:
    """The scripted model on a loopback port (``.url``) for the duration."""
    model = ScriptedAnthropic(turns)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            try:
                with lock:
                    body = model.answer(request)
            except AssertionError as exc:
                body = json.dumps(
                    {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": str(exc)},
                    }
                ).encode()
                self.send_response(400)
                self.send_header("content-type", "application/json")
            else:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    model.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

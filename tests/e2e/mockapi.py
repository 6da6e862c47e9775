"""A stand-in for the Anthropic Messages API that the real `claude` CLI can run against.

A threaded HTTP server on 127.0.0.1 with an ephemeral port. The main conversation (the requests
that offer the `Bash` tool) is answered by a per-test *script*: a callable that gets the request
and returns the next assistant turn (text and tool calls), so a test decides what the "model"
does with the real tools, keyed by what the last request contains (a hook's feedback, a tool
result). Every other model request (titles, summaries) gets a short text. Every request is kept
in `log`, which the tests assert on; unknown paths are logged and answered with an
Anthropic-style 404 so the CLI goes on.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "claude-sonnet-4-6"


@dataclass
class Tool:
    """One tool call the model makes."""

    name: str
    input: dict[str, Any]


@dataclass
class Turn:
    """One assistant message: optional text, then tool calls (stop_reason tool_use) or none."""

    text: str = ""
    tools: list[Tool] = field(default_factory=list)
    error: tuple[int, str, str] | None = None
    """Answer with an API error instead: (HTTP status, error type, message)."""


def say(text: str) -> Turn:
    return Turn(text=text)


def call(name: str, text: str = "", **tool_input: Any) -> Turn:
    return Turn(text=text, tools=[Tool(name, tool_input)])


@dataclass
class Request:
    """A main-conversation request, as the script sees it."""

    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    def last_user_text(self) -> str:
        """Everything in the last user message as text: its text blocks and tool results."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return content_text(message.get("content"))
        return ""

    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.body.get("tools") or [] if isinstance(t, dict)]

    def workspace(self) -> str | None:
        for line in system_text(self.body).splitlines():
            if "Primary working directory:" in line:
                return line.split("Primary working directory:", 1)[1].strip()
        return None


Script = Callable[[Request], Turn]


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(content_text(block.get("content")))
    return "\n".join(parts)


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    return content_text(system) if not isinstance(system, str) else system


def steps(*turns: Turn, then: Turn | None = None) -> Script:
    """A script that plays `turns` in order, one per main request, then `then` (or "Done.")."""
    queue = list(turns)
    lock = threading.Lock()

    def script(_request: Request) -> Turn:
        with lock:
            return queue.pop(0) if queue else (then or say("Done."))

    return script


class MockAPI:
    """The server; use as a context manager. `url` goes into ANTHROPIC_BASE_URL."""

    def __init__(self, script: Script | None = None, log_file: Path | None = None) -> None:
        self.script: Script = script or steps()
        self.log: list[dict[str, Any]] = []
        self.log_file = log_file
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.errors: list[str] = []
        self.input_tokens = 100
        """What every answer says it read: a big number makes Claude Code report a big cost."""
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> MockAPI:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- the request log -------------------------------------------------------------------

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.log.append(entry)
            if self.log_file is not None:
                with self.log_file.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(entry) + "\n")

    def main_requests(self) -> list[Request]:
        with self._lock:
            return [
                Request(e["body"])
                for e in self.log
                if e["path"].startswith("/v1/messages") and e.get("main") and isinstance(e.get("body"), dict)
            ]

    def user_texts(self) -> list[str]:
        """The last user message of every main request: the prompt, tool results, hook feedback."""
        return [r.last_user_text() for r in self.main_requests()]

    # --- answers ---------------------------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    def answer(self, body: dict[str, Any]) -> tuple[Turn, bool]:
        tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        if "Bash" not in tools:
            text = system_text(body) + content_text((body.get("messages") or [{}])[-1].get("content"))
            if "title" in text.lower():
                return say(json.dumps({"title": "Loopdeck test"})), False
            return say("Summary."), False
        try:
            return self.script(Request(body)), True
        except Exception as exc:  # a broken script must show up in the test, not hang the CLI
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return say(f"mock script error: {exc}"), True

    def message(self, turn: Turn) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for tool in turn.tools:
            content.append(
                {"type": "tool_use", "id": self.next_id("toolu"), "name": tool.name, "input": tool.input}
            )
        return {
            "id": self.next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": "tool_use" if turn.tools else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": 20,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    @staticmethod
    def sse(message: dict[str, Any]) -> bytes:
        """The real streaming event sequence for one message."""
        events: list[tuple[str, dict[str, Any]]] = []
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**message["usage"], "output_tokens": 1},
        }
        events.append(("message_start", {"type": "message_start", "message": start}))
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                events.append(("ping", {"type": "ping"}))
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                    )
                )
            else:
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {**block, "input": {}},
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                        },
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("request-id", api.next_id("req"))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _json(self, status: int, data: Any) -> None:
                self._send(status, json.dumps(data).encode())

            def _not_found(self) -> None:
                self._json(
                    404,
                    {
                        "type": "error",
                        "error": {"type": "not_found_error", "message": f"mock: no {self.path}"},
                    },
                )

            def do_HEAD(self) -> None:
                api.record({"method": "HEAD", "path": self.path})
                self._send(200, b"")

            def do_GET(self) -> None:
                api.record({"method": "GET", "path": self.path})
                path = self.path.split("?", 1)[0]
                if path == "/":
                    self._send(200, b"ok", "text/plain")
                elif path == "/v1/models":
                    self._json(
                        200,
                        {
                            "data": [
                                {
                                    "type": "model",
                                    "id": MODEL,
                                    "display_name": "Mock",
                                    "created_at": "2026-01-01T00:00:00Z",
                                }
                            ],
                            "has_more": False,
                            "first_id": MODEL,
                            "last_id": MODEL,
                        },
                    )
                else:
                    self._not_found()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                path = self.path.split("?", 1)[0]
                if path == "/v1/messages/count_tokens":
                    api.record({"method": "POST", "path": path, "body": None})
                    self._json(200, {"input_tokens": 1000})
                    return
                if path != "/v1/messages" or not isinstance(body, dict):
                    api.record({"method": "POST", "path": path, "body": None})
                    self._not_found()
                    return
                turn, main = api.answer(body)
                status = turn.error[0] if turn.error is not None else 200
                api.record({"method": "POST", "path": path, "body": body, "main": main, "status": status})
                if turn.error is not None:
                    status, kind, text = turn.error
                    self._json(status, {"type": "error", "error": {"type": kind, "message": text}})
                    return
                message = api.message(turn)
                if body.get("stream"):
                    self._send(200, api.sse(message), "text/event-stream")
                else:
                    self._json(200, message)

        return Handler


def tool_results(request: Request) -> Iterable[dict[str, Any]]:
    """The tool_result blocks of the request's last user message."""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                yield from (b for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
            return

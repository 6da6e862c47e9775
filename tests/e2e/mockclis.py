"""A stand-in for the model APIs of Codex CLI, Gemini CLI and OpenCode, on one loopback port.

One threaded HTTP server on 127.0.0.1 (port 0), routed by path as each CLI calls it:

* `POST …/responses` — the OpenAI Responses API as Codex CLI streams it (SSE
  `response.created`, one `response.output_item.done` per item, `response.completed` with usage);
* `POST …/chat/completions` — Chat Completions as OpenCode's `@ai-sdk/openai-compatible`
  provider streams it (`data:` chunks with `delta.content` / `delta.tool_calls`, a
  `finish_reason` chunk, a usage chunk, `[DONE]`);
* `POST …/models/M:streamGenerateContent` (SSE) and `:generateContent` (the model router's
  JSON) — the Gemini API as Gemini CLI calls it.

The main conversation (a request that offers tools) is answered by the test's *script*: a
callable that gets a `Call` (which CLI, whether the last input is a tool result and what it
said) and returns a `Reply` (text, a shell command through the CLI's own shell tool, or an HTTP
error with headers). Side requests (OpenCode's title, Gemini's router) get fixed answers.
Every request is logged with its path, its main-ness and the reply, so a test asserts on what
the CLI sent. The shapes follow what the CLIs were seen to send and accept (see the README's
table of backends); nothing here reaches any other host.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SHELL_TOOLS = {"codex": "exec_command", "gemini": "run_shell_command", "opencode": "bash"}
"""Each CLI's shell tool, as it offers it to the model."""
USAGE = {"input": 1000, "cached": 200, "output": 50}
"""What every main answer says it used: tests check the sums loopdeck reports."""


@dataclass
class Reply:
    """One model answer: optional text, then one shell command (or none); or an HTTP error."""

    text: str = ""
    shell: str | None = None
    status: int = 200
    body: dict[str, Any] | None = None
    """The error body (status >= 400)."""
    headers: dict[str, str] = field(default_factory=dict)
    tool: str | None = None
    """Call this tool instead of the CLI's shell tool (e.g. one it did not offer)."""
    delay: float = 0.0
    """Seconds to wait before answering (a slower model)."""


def say(text: str) -> Reply:
    return Reply(text=text)


def shell(command: str, text: str = "") -> Reply:
    return Reply(text=text, shell=command)


@dataclass
class Call:
    """A main-conversation request, as the script sees it."""

    cli: str
    """`codex`, `gemini` or `opencode`."""
    body: dict[str, Any]
    tools: list[str]
    tool_result: str | None
    """The text of the tool result the request ends with, None when it ends with a user turn."""
    prompt: str
    """The text of the last user message (the CLI's prompt, as the model reads it)."""


Script = Callable[[Call], Reply]


def _text(value: Any) -> str:
    """All strings in a JSON value, joined (message contents come in many shapes)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(_text(v) for k, v in value.items() if k in ("text", "content", "parts", "output"))
    return ""


def read_codex(body: dict[str, Any]) -> tuple[list[str], str | None, str]:
    tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")]
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    last = items[-1] if items else {}
    result = str(last.get("output", "")) if last.get("type") == "function_call_output" else None
    users = [i for i in items if i.get("role") == "user"]
    return tools, result, _text(users[-1].get("content")) if users else ""


def read_gemini(body: dict[str, Any]) -> tuple[list[str], str | None, str]:
    tools: list[str] = []
    for group in body.get("tools") or []:
        for decl in group.get("functionDeclarations") or [] if isinstance(group, dict) else []:
            if isinstance(decl, dict) and decl.get("name"):
                tools.append(str(decl["name"]))
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    last = contents[-1] if contents else {}
    responses = [
        p["functionResponse"]
        for p in last.get("parts") or []
        if isinstance(p, dict) and "functionResponse" in p
    ]
    result = json.dumps(responses[-1].get("response")) if responses else None
    prompt = ""
    for content in reversed(contents):
        parts = content.get("parts") or []
        texts = [str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if content.get("role") == "user" and texts:
            prompt = "\n".join(texts)
            break
    return tools, result, prompt


def read_chat(body: dict[str, Any]) -> tuple[list[str], str | None, str]:
    tools = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            tools.append(str(function["name"]))
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last = messages[-1] if messages else {}
    result = _text(last.get("content")) if last.get("role") == "tool" else None
    users = [m for m in messages if m.get("role") == "user"]
    return tools, result, _text(users[-1].get("content")) if users else ""


def limit(cli: str, until: float) -> Reply:
    """A usage limit that lifts at the epoch `until`, in the shape each CLI's API sends it:
    Codex's `usage_limit_reached` with the `x-codex-primary-*` headers its session file records,
    Gemini's per-day `RESOURCE_EXHAUSTED` (no retry) whose message says when to retry, an
    OpenAI-style 429 for OpenCode with `retry-after: 0` (its own six retries pass at once) and
    the reset in `x-ratelimit-reset-requests`."""
    seconds = max(1, int(until - time.time() + 0.999))
    if cli == "codex":
        body = {
            "error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": int(until),
                "resets_in_seconds": seconds,
            }
        }
        headers = {
            "x-codex-primary-used-percent": "100",
            "x-codex-primary-window-minutes": "300",
            "x-codex-primary-reset-at": str(int(until)),
        }
        return Reply(status=429, body=body, headers=headers)
    if cli == "gemini":
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{seconds}s"},
        ]
        message = f"You exceeded your current quota. Please retry in {seconds}s."
        body = {
            "error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": message, "details": details}
        }
        return Reply(status=429, body=body)
    body = {
        "error": {
            "message": f"Rate limit reached for requests. Please try again in {seconds}s.",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    return Reply(
        status=429, body=body, headers={"retry-after": "0", "x-ratelimit-reset-requests": f"{seconds}s"}
    )


def tick_script(root: Path, todo: str = "TODO.md", done: str = "ALL_TASKS_COMPLETE") -> Script:
    """A diligent model: after a tool result it reports; else it ticks the checklist's first open
    box with one shell command, or, with none left, signals completion."""

    def script(call: Call) -> Reply:
        path = root / todo
        if call.tool_result is not None:
            left = path.exists() and "- [ ]" in path.read_text(encoding="utf-8")
            return say("Ticked one task." if left else f"Ticked the last task.\n{done}")
        if path.exists() and "- [ ]" in path.read_text(encoding="utf-8"):
            return shell(f"sed -i '0,/- \\[ \\]/s//- [x]/' {todo}", "I will tick the next task.")
        return say(f"All tasks are ticked.\n{done}")

    return script


class MockCLIs:
    """The server; use as a context manager. `url` is `http://127.0.0.1:PORT`."""

    def __init__(self, script: Script | None = None, log_file: Path | None = None) -> None:
        self.script: Script = script or (lambda _call: say("Done."))
        self.log: list[dict[str, Any]] = []
        self.log_file = log_file
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> MockCLIs:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.log.append(entry)
            if self.log_file is not None:
                with self.log_file.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(entry) + "\n")

    def main_calls(self, cli: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.log if e.get("main") and (cli is None or e.get("cli") == cli)]

    def answer(self, cli: str, body: dict[str, Any]) -> Reply:
        reader = {"codex": read_codex, "gemini": read_gemini, "opencode": read_chat}[cli]
        tools, result, prompt = reader(body)
        try:
            return self.script(Call(cli, body, tools, result, prompt))
        except Exception as exc:  # a broken script shows up in the test, never hangs the CLI
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return say(f"mock script error: {exc}")

    # --- the three wire formats ------------------------------------------------------------

    def codex_events(self, reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        rid = self.next_id("resp")
        items: list[dict[str, Any]] = []
        if reply.text:
            items.append(
                {
                    "type": "message",
                    "id": self.next_id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
                }
            )
        if reply.shell is not None:
            items.append(
                {
                    "type": "function_call",
                    "id": self.next_id("fc"),
                    "call_id": self.next_id("call"),
                    "name": reply.tool or SHELL_TOOLS["codex"],
                    "arguments": json.dumps({"cmd": reply.shell}),
                    "status": "completed",
                }
            )
        created = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "in_progress"}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": created})
        ]
        for index, item in enumerate(items):
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                )
            )
        usage = {
            "input_tokens": USAGE["input"],
            "input_tokens_details": {"cached_tokens": USAGE["cached"]},
            "output_tokens": USAGE["output"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": USAGE["input"] + USAGE["output"],
        }
        done = {**created, "status": "completed", "output": items, "usage": usage}
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        return events

    def gemini_chunk(self, reply: Reply, model: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if reply.text:
            parts.append({"text": reply.text})
        if reply.shell is not None:
            args = {"command": reply.shell, "description": "run a command"}
            parts.append({"functionCall": {"name": reply.tool or SHELL_TOOLS["gemini"], "args": args}})
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": USAGE["input"],
                "cachedContentTokenCount": USAGE["cached"],
                "candidatesTokenCount": USAGE["output"],
                "totalTokenCount": USAGE["input"] + USAGE["output"],
            },
            "modelVersion": model,
            "responseId": self.next_id("gem"),
        }

    def chat_chunks(self, reply: Reply, model: str) -> list[dict[str, Any]]:
        cid = self.next_id("chatcmpl")
        base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        chunks: list[dict[str, Any]] = []
        if reply.text:
            delta = {"role": "assistant", "content": reply.text}
            chunks.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        if reply.shell is not None:
            call = {
                "index": 0,
                "id": self.next_id("call"),
                "type": "function",
                "function": {
                    "name": reply.tool or SHELL_TOOLS["opencode"],
                    "arguments": json.dumps({"command": reply.shell, "description": "run a command"}),
                },
            }
            chunks.append(
                {**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
            )
        finish = "tool_calls" if reply.shell is not None else "stop"
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        usage = {
            "prompt_tokens": USAGE["input"],
            "completion_tokens": USAGE["output"],
            "total_tokens": USAGE["input"] + USAGE["output"],
            "prompt_tokens_details": {"cached_tokens": USAGE["cached"]},
        }
        chunks.append({**base, "choices": [], "usage": usage})
        return chunks

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(
                self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                self._send(status, json.dumps(data).encode(), "application/json", headers)

            def _sse(self, frames: list[bytes]) -> None:
                self._send(200, b"".join(frames), "text/event-stream")

            def do_GET(self) -> None:
                mock.record({"method": "GET", "path": self.path})
                if self.path.split("?", 1)[0].endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "mock-model", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": f"mock: no {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                if not isinstance(body, dict):
                    body = {}
                path = self.path.split("?", 1)[0]
                if path.endswith("/responses"):
                    self.serve("codex", path, body)
                elif path.endswith("/chat/completions"):
                    self.serve("opencode", path, body)
                elif ":streamGenerateContent" in path or ":generateContent" in path:
                    self.serve("gemini", path, body)
                elif ":countTokens" in path:
                    mock.record({"method": "POST", "path": path})
                    self._json(200, {"totalTokens": USAGE["input"]})
                else:
                    mock.record({"method": "POST", "path": path})
                    self._json(404, {"error": {"message": f"mock: no {path}"}})

            def serve(self, cli: str, path: str, body: dict[str, Any]) -> None:
                tools = {"codex": read_codex, "gemini": read_gemini, "opencode": read_chat}[cli](body)[0]
                main = bool(tools)
                model = str(body.get("model") or path.rsplit("/", 1)[-1].split(":", 1)[0])
                reply = mock.answer(cli, body) if main else mock.side_answer(cli, path, body)
                mock.record(
                    {
                        "method": "POST",
                        "path": path,
                        "cli": cli,
                        "main": main,
                        "model": model,
                        "status": reply.status,
                        "reply": {"text": reply.text, "shell": reply.shell},
                        "body": body,
                    }
                )
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status >= 400:
                    self._json(
                        reply.status, reply.body or {"error": {"message": "mock error"}}, reply.headers
                    )
                    return
                if cli == "codex":
                    events = mock.codex_events(reply)
                    self._sse(
                        [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
                    )
                elif cli == "opencode":
                    chunks = mock.chat_chunks(reply, model)
                    frames = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
                    self._sse(frames)
                elif ":streamGenerateContent" in path:
                    self._sse([f"data: {json.dumps(mock.gemini_chunk(reply, model))}\r\n\r\n".encode()])
                else:
                    self._json(200, mock.gemini_chunk(reply, model))

        return Handler

    def side_answer(self, cli: str, path: str, body: dict[str, Any]) -> Reply:
        """Requests without tools: Gemini's model router wants a complexity score, JSON-mode
        requests an object; OpenCode's title generator and anything else a short text."""
        if cli == "gemini":
            config = body.get("generationConfig") or {}
            text = json.dumps(body)
            if "complexity" in text:
                return say(json.dumps({"complexity_reasoning": "a small task", "complexity_score": 10}))
            if isinstance(config, dict) and config.get("responseMimeType") == "application/json":
                return say("{}")
        return say("Loopdeck test")

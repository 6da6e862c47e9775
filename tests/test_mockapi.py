"""The e2e suite's mock Messages API on its own (it runs even where the real CLI is not installed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from tests.e2e.mockapi import MockAPI, Request, call, say, steps


def post(url: str, body: dict[str, Any]) -> tuple[int, str, str]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


MAIN = {"tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": "go"}]}


def test_streams_the_real_event_sequence() -> None:
    with MockAPI(steps(call("Edit", "Editing.", file_path="/x", old_string="a", new_string="b"))) as api:
        status, kind, body = post(api.url + "/v1/messages", {**MAIN, "stream": True})
    assert status == 200 and kind == "text/event-stream"
    events = [line[len("event: ") :] for line in body.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == 2 == events.count("content_block_stop")
    data = [json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")]
    deltas = [d["delta"] for d in data if d["type"] == "content_block_delta"]
    assert deltas[0] == {"type": "text_delta", "text": "Editing."}
    assert json.loads(deltas[1]["partial_json"]) == {"file_path": "/x", "old_string": "a", "new_string": "b"}
    stop = next(d for d in data if d["type"] == "message_delta")
    assert stop["delta"]["stop_reason"] == "tool_use"


def test_plain_json_side_requests_and_the_log() -> None:
    seen: list[str] = []

    def script(request: Request) -> Any:
        seen.append(request.last_user_text())
        return say("Hi.")

    with MockAPI(script) as api:
        status, _kind, body = post(api.url + "/v1/messages", MAIN)
        assert status == 200 and json.loads(body)["content"] == [{"type": "text", "text": "Hi."}]
        status, _kind, body = post(
            api.url + "/v1/messages", {"messages": [{"role": "user", "content": "a title"}]}
        )
        assert json.loads(json.loads(body)["content"][0]["text"]) == {"title": "Loopdeck test"}
        status, _kind, body = post(api.url + "/v1/messages/count_tokens", MAIN)
        assert json.loads(body) == {"input_tokens": 1000}
        status, _kind, body = post(api.url + "/v1/unknown", {})
        assert status == 404 and json.loads(body)["type"] == "error"
    assert seen == ["go"]  # only the main conversation reaches the script
    assert [e["path"] for e in api.log] == [
        "/v1/messages",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/unknown",
    ]
    assert len(api.main_requests()) == 1 and api.user_texts() == ["go"]

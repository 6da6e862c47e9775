"""Notifications: one per event a person must know about, sent off the loop's path, to a real
HTTP server on loopback; a failing target is journaled and stops nothing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from loop.drivers.notify import check_target, messages
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.conftest import run_loopdeck
from tests.test_runner import agent, demo, kinds, run_args  # noqa: F401  (demo is a fixture)


class Hook:
    """A webhook receiver on 127.0.0.1: every JSON body it gets, in order."""

    def __init__(self) -> None:
        self.received: list[dict[str, object]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                outer.received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/loopdeck"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, count: int, timeout: float = 30) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return [str(m["kind"]) for m in self.received]


@pytest.fixture
def hook() -> Iterator[Hook]:
    receiver = Hook()
    yield receiver
    receiver.server.shutdown()


def test_one_notification_per_event_kind_in_a_scripted_loop(demo: Workspace, hook: Hook) -> None:  # noqa: F811
    args = run_args(
        "--notify", hook.url, agent_cmd=agent("--limit-at", "4", "--limit-for", "1", "--ask-at", "6")
    )
    asked = run_loopdeck("-C", str(demo.root), *args, cwd=demo.root, timeout=120)
    assert asked.returncode == 1 and "Ended:       question" in asked.stdout, asked.stdout
    assert run_loopdeck("-C", str(demo.root), "answer", "SQLite").returncode == 0
    done = run_loopdeck("-C", str(demo.root), *run_args(agent_cmd=agent()), cwd=demo.root, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    got = hook.wait_for(3)
    assert sorted(got) == ["completed", "question", "usage-limit"]
    question = next(m for m in hook.received if m["kind"] == "question")
    assert "Which storage" in str(question["text"]) and str(question["workspace"]) == str(demo.root)


def test_an_escalation_is_notified_and_a_failing_target_is_journaled(demo: Workspace, hook: Hook) -> None:  # noqa: F811
    dead = "http://127.0.0.1:9/nobody-listens"
    args = run_args("--max-iterations", "1", "--notify", dead, "--notify", hook.url)
    done = run_loopdeck("-C", str(demo.root), *args, cwd=demo.root)
    assert done.returncode == 1
    assert hook.wait_for(1) == ["escalation"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        warnings = [e for e in Journal(demo.journal).tail(200).events if e.kind == "warning"]
        # by its scheme and host only: a webhook's path can be its secret
        if any("notification to http://127.0.0.1:9/\u2026 failed" in str(e.data) for e in warnings):
            assert not any("nobody-listens" in str(e.data) for e in warnings)
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the failing target was not journaled")


def test_messages_and_targets() -> None:
    due = messages(
        [("blocked", {}), ("escalation", {"reason": "stuck"}), ("completed", {"reason": "done"})], "proj", 7
    )
    assert [m["kind"] for m in due] == ["escalation", "completed"]
    assert due[0]["text"] == "loopdeck needs you: stuck [proj, iteration 7]"
    assert check_target("desktop") is None and check_target("https://x.invalid/h") is None
    assert check_target("cmd:notify-me --loud") is None
    assert "unknown notification target" in (check_target("smoke-signals") or "")
    assert check_target("cmd:") == "cmd: names no program"


def test_a_bad_target_is_refused_before_the_loop_starts(tmp_path: Path) -> None:
    done = run_loopdeck("-C", str(tmp_path), "start", "x", "--notify", "carrier-pigeon")
    assert done.returncode == 1 and "unknown notification target 'carrier-pigeon'" in done.stderr

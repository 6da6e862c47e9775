"""`loopdeck serve`: refused on a network without a token, the token checked, and the monitor
working in a real headless browser (skipped, with one line saying why, where there is none)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, Ran
from tui import screenshots, serve

BROWSER = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium") or "") if p and Path(p).exists()), None
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_other_hosts_need_a_token(cli: Callable[..., Ran]) -> None:
    ran = cli("serve", "--host", "0.0.0.0")
    assert ran.code == 1
    assert "--token" in ran.err and "steer your loops" in ran.err
    ran = cli("serve", "--host", "0.0.0.0", "--token", "short")
    assert ran.code == 1 and "at least 8" in ran.err
    serve.check_binding("127.0.0.1", None)  # local needs none
    serve.check_binding("0.0.0.0", "a-long-secret")


def test_no_user_text_reaches_the_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(serve.ENV, "")  # restored after the test
    odd = tmp_path / "a; rm -rf ~ $(reboot)"
    odd.mkdir()
    server = serve.make_server([str(odd)], None, 4, "127.0.0.1", 8765, None)
    assert server.command == serve.child_command()
    assert str(odd) not in server.command
    assert json.loads(os.environ[serve.ENV])["dirs"] == [str(odd)]


async def test_the_token_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    monkeypatch.setenv(serve.ENV, "")

    server = serve.make_server([str(tmp_path)], None, 4, "0.0.0.0", 8765, "a-long-secret")
    app = await server._make_app()
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/")).status == 401
        assert (await client.get("/?token=wrong-secret")).status == 401
        assert (await client.get("/ws")).status == 401
        ok = await client.get("/?token=a-long-secret")
        assert ok.status == 200
        assert "loopdeck" in await ok.text()
        # the cookie it set lets the page's own requests through
        assert (await client.get("/static/css/xterm.css")).status == 200


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


class Page:
    """A page of a headless Chromium, driven over the DevTools protocol."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.frames: list[bytes] = []
        self.replies: dict[int, Any] = {}

    async def call(self, method: str, **params: Any) -> Any:
        self.next_id += 1
        wanted = self.next_id
        await self.ws.send_json({"id": wanted, "method": method, "params": params})
        while wanted not in self.replies:
            await self.pump()
        return self.replies.pop(wanted)

    async def pump(self, timeout: float = 10) -> None:
        message = json.loads((await self.ws.receive(timeout=timeout)).data)
        if "id" in message:
            self.replies[message["id"]] = message.get("result")
        elif message.get("method") == "Network.webSocketFrameReceived":
            response = message["params"]["response"]
            data = response["payloadData"]
            self.frames.append(base64.b64decode(data) if response.get("opcode") == 2 else data.encode())

    async def wait_for_text(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text.encode() in frame for frame in self.frames):
                return
            with contextlib.suppress(TimeoutError):
                await self.pump(timeout=1)
        raise AssertionError(f"the page never showed {text!r}")


@pytest.mark.skipif(
    BROWSER is None, reason="no Chromium installed (apt-get install chromium) for the browser test"
)
async def test_the_monitor_in_a_real_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp

    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)
    ws = screenshots.running(tmp_path / "browser-e2e")
    port, debug_port = _free_port(), _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-home")}
    server = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "serve", str(ws.root), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert BROWSER is not None
    browser = subprocess.Popen(
        [
            BROWSER,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            f"--remote-debugging-port={debug_port}",
            "--window-size=1280,900",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        await _wait_port(port)
        await _wait_port(debug_port)
        async with aiohttp.ClientSession() as session:
            targets = await (await session.get(f"http://127.0.0.1:{debug_port}/json/list")).json()
            url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            async with session.ws_connect(url, max_msg_size=0) as cdp:
                page = Page(cdp)
                await page.call("Network.enable")
                await page.call("Page.enable")
                await page.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
                # The monitor's status bar, drawn by the monitor process through the websocket.
                await page.wait_for_text("browser-e2e")
                await page.wait_for_text("iteration")
                await page.call(
                    "Runtime.evaluate", expression="document.querySelector('.xterm-helper-textarea').focus()"
                )
                await page.call("Input.dispatchKeyEvent", type="keyDown", key="p", text="p", code="KeyP")
                await page.call("Input.dispatchKeyEvent", type="keyUp", key="p", code="KeyP")
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not ws.control.exists():
                    with contextlib.suppress(TimeoutError):
                        await page.pump(timeout=0.2)
                assert ws.control.exists(), "the key press never reached the control queue"
                [command] = [json.loads(line) for line in ws.control.read_text().splitlines()]
                assert command["kind"] == "pause" and command["source"] == "tui"
    finally:
        for proc in (browser, server):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()

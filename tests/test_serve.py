"""`loopdeck serve`: a token on every host, pages from elsewhere and rebound names refused, the
token never logged, all against a real server on a free port; and the monitor working in a real
headless browser (skipped, with one line saying why, where there is none)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from loop.store.paths import Workspace
from tests.conftest import REPO, Ran
from tools import screenshots
from tui import serve

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


def test_a_short_token_is_refused(
    cli: Callable[..., Ran], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    short = tmp_path / "token"
    short.write_text("short\n")
    short.chmod(0o600)
    ran = cli("serve", "--host", "0.0.0.0", "--token-file", str(short))
    assert ran.code == 1 and "--token-file should be at least 8" in ran.err
    monkeypatch.setenv(serve.TOKEN_ENV, "short")
    ran = cli("serve")
    assert ran.code == 1 and f"{serve.TOKEN_ENV} should be at least 8" in ran.err
    assert ran.out == ""  # nothing served, no address printed


def test_a_token_on_every_host_made_up_unless_given(tmp_path: Path) -> None:
    token, made_up = serve.choose_token(None, {})
    assert made_up and len(token) >= 43
    assert serve.choose_token(None, {})[0] != token
    given = tmp_path / "token"
    given.write_text("given-secret\n")
    given.chmod(0o600)
    assert serve.choose_token(str(given), {serve.TOKEN_ENV: "from-the-env"}) == ("given-secret", False)
    assert serve.choose_token(None, {serve.TOKEN_ENV: "from-the-env"}) == ("from-the-env", False)


def test_a_busy_port_is_one_line(cli: Callable[..., Ran]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ran = cli("serve", "--port", str(port))
    assert ran.code == 1
    assert ran.err.strip().splitlines() == [f"loopdeck: error: port {port} is in use; give --port"]
    assert ran.out == ""


def test_no_user_text_reaches_the_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(serve.ENV, "")  # restored after the test
    odd = tmp_path / "a; rm -rf ~ $(reboot)"
    odd.mkdir()
    server = serve.make_server([str(odd)], None, 4, "127.0.0.1", 8765, "a-long-secret")
    assert server.command == serve.child_command()
    assert str(odd) not in server.command
    assert json.loads(os.environ[serve.ENV])["dirs"] == [str(odd)]


def test_which_host_names_and_origins_are_this_server() -> None:
    from tui.serve_http import Guard

    local = Guard.for_binding("127.0.0.1", 8000, "a-long-secret")
    for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000"):
        assert local.host_name(host) is not None, host
    strangers: tuple[str | None, ...] = (
        "evil.example:8000",
        "127.0.0.1.evil.example:8000",
        "localhost.evil.example",
        "evil@127.0.0.1:8000",
        "127.0.0.1:8000/x",
        "192.168.1.9:8000",  # not this server's loopback bind
        "",
        None,
    )
    for stranger in strangers:
        assert local.host_name(stranger) is None, stranger
    anywhere = Guard.for_binding("0.0.0.0", 8000, "a-long-secret")
    for host in ("192.168.1.9:8000", "[fe80::1]:8000", socket.gethostname(), "localhost:8000"):
        assert anywhere.host_name(host) is not None, host
    assert anywhere.host_name("evil.example:8000") is None  # a rebound name is never an address

    served = ("127.0.0.1", 8000)
    assert Guard.origin_ok("http://127.0.0.1:8000", "http", served)
    for origin in (
        "http://evil.example",
        "http://127.0.0.1:8001",
        "https://127.0.0.1:8000",
        "http://localhost:8000",
        "null",
        "",
        "file://",
        "http://127.0.0.1:8000/page",
        "http://[",
    ):
        assert not Guard.origin_ok(origin, "http", served), origin
    assert Guard.origin_ok("http://127.0.0.1", "http", ("127.0.0.1", None))


def test_a_traceback_in_the_log_loses_the_token() -> None:
    import logging

    from tui.serve_http import Redact

    redact = Redact()
    redact.secrets.add("s3cret-token-value")
    try:
        raise ValueError("bad request /ws?token=s3cret-token-value&width=80")
    except ValueError:
        record = logging.LogRecord(
            "aiohttp.server", logging.ERROR, __file__, 1, "%s", ("s3cret-token-value",), None
        )
        record.exc_info = sys.exc_info()
    assert redact.filter(record)
    text = logging.Formatter().format(record)
    assert "s3cret" not in text and "ValueError" in text and "token=…" in text
    assert record.exc_info is None  # its frames' locals never reach a handler


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


TOKEN = "a-long-secret-for-the-tests"


@dataclass
class Serving:
    """`loopdeck serve` in a process of its own, its output in files."""

    proc: subprocess.Popen[bytes]
    port: int
    ws: Workspace
    out: Path
    err: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    async def printed(self, timeout: float = 20) -> str:
        """The first line it printed on stdout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.out.read_text(errors="replace")
            if "\n" in text:
                return text.splitlines()[0]
            if self.proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        raise AssertionError(f"serve printed nothing: {self.output()!r}")

    async def cookie(self, session: Any, token: str = TOKEN) -> None:
        """Open the page once with the token: it leaves a cookie in the session."""
        await session.get(f"{self.base}/?token={token}")


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: str | None = TOKEN, *args: str
) -> AsyncIterator[Serving]:
    """A real server on a free port, serving a running loop (`token` through the environment)."""
    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)
    ws = screenshots.running(tmp_path / "served")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-home")}
    env.pop("LOOPDECK_SERVE_TOKEN", None)
    if token is not None:
        env["LOOPDECK_SERVE_TOKEN"] = token
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    with out.open("wb") as out_file, err.open("wb") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "serve", str(ws.root), "--port", str(port), *args],
            env=env,
            stdout=out_file,
            stderr=err_file,
            start_new_session=True,
        )
    try:
        await _wait_port(port)
        yield Serving(proc, port, ws, out, err)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _screen(socket_: Any, text: bytes, timeout: float = 30) -> None:
    """Read the monitor's output off its websocket until `text` shows."""
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and text not in seen:
        with contextlib.suppress(TimeoutError):
            message = await socket_.receive(timeout=1)
            data = message.data
            seen += data if isinstance(data, bytes) else str(data).encode()
    assert text in seen, f"the monitor never showed {text!r}"


def _whole_lines(ws: Workspace) -> str:
    """The control queue's complete lines so far ("" while none): the sender creates the file
    and writes its line in two calls, so a file that exists may still be empty."""
    try:
        text = ws.control.read_text()
    except FileNotFoundError:
        return ""
    return text[: text.rfind("\n") + 1]


async def _control_queue(ws: Workspace, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _whole_lines(ws):
        await asyncio.sleep(0.05)
    text = _whole_lines(ws)
    assert text, "the key press never reached the control queue"
    return [json.loads(line) for line in text.splitlines()]


async def test_the_control_queue_is_read_once_its_line_is_whole(tmp_path: Path) -> None:
    """A file that exists but holds no whole line yet (created, not yet written) is waited for,
    not read as an empty queue."""
    ws = Workspace(tmp_path)
    ws.control.parent.mkdir(parents=True, exist_ok=True)
    ws.control.write_text("")
    line = json.dumps({"kind": "pause", "source": "tui"})

    async def write_later() -> None:
        await asyncio.sleep(0.2)
        ws.control.write_text(line[:10])
        await asyncio.sleep(0.2)
        ws.control.write_text(line + "\n")

    writer = asyncio.create_task(write_later())
    [command] = await _control_queue(ws, timeout=10)
    await writer
    assert command["kind"] == "pause"


async def test_a_default_run_prints_an_address_with_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aiohttp

    async with (
        serving(tmp_path, monkeypatch, None) as served,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session,
    ):
        line = await served.printed()
        found = re.search(rf"http://127\.0\.0\.1:{served.port}/\?token=([A-Za-z0-9_-]{{43,}}) ", line)
        assert found, line
        token = found.group(1)
        assert (await session.get(f"{served.base}/")).status == 401
        response = await session.get(found.group(0).strip(), allow_redirects=False)
        assert response.status == 200
        cookie = response.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and token not in cookie
        swap = await response.text()
        assert 'location.replace("/")' in swap and token not in swap  # on to the address without it
        hostile = await session.get(f"{served.base}/?fontsize=20&token={token}&x=</script><script>alert(1)//")
        assert "<script>alert" not in await hostile.text()
        assert 'location.replace("/?fontsize=20&x=' in await hostile.text()
        page = await session.get(f"{served.base}/")
        assert page.status == 200
        assert f'data-session-websocket-url="ws://127.0.0.1:{served.port}/ws"' in await page.text()
        # The page asked for by another of this machine's names sends its websocket there too,
        # where the browser has the cookie and the Origin matches.
        await session.get(f"http://localhost:{served.port}/?token={token}")
        aliased = await session.get(f"http://localhost:{served.port}/")
        assert f'data-session-websocket-url="ws://localhost:{served.port}/ws"' in await aliased.text()
    # Printed once, never logged, though the access log has a line for each request.
    assert served.output().count(token) == 1
    assert served.err.read_text().count('"GET /"') >= 4


async def test_the_token_is_never_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp

    async with (
        serving(tmp_path, monkeypatch) as served,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session,
    ):
        await served.printed()
        for path in (f"/?token={TOKEN}", f"/static/css/xterm.css?token={TOKEN}", "/?token=a-wrong-guess"):
            await session.get(served.base + path, allow_redirects=False)
        async with session.ws_connect(f"{served.base}/ws?token={TOKEN}&width=80&height=24") as socket_:
            await socket_.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and served.err.read_text().count('"GET /') < 4:
            await asyncio.sleep(0.05)
    output = served.output()
    assert TOKEN not in output and "a-wrong-guess" not in output
    assert output.count('"GET /') >= 4, output  # the log was there to leak it
    assert "?token=…" in served.out.read_text()  # a token it was given is not printed either


async def test_without_the_token_nothing_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp

    async with (
        serving(tmp_path, monkeypatch) as served,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session,
    ):
        origin = {"Origin": served.base}
        forged = {"Cookie": f"loopdeck_{served.port}={TOKEN}"}  # the token itself is not the cookie
        for path, headers in (
            ("/", {}),
            ("/?token=a-wrong-guess", {}),
            (f"/?token={TOKEN[:-1]}", {}),
            (f"/?Token={TOKEN}", {}),
            ("/", forged),
            ("/static/css/xterm.css", {}),
            ("/download/x", {}),
        ):
            assert (await session.get(served.base + path, headers=headers)).status == 401, path
        for url in (f"{served.base}/ws", f"{served.base}/ws?token=a-wrong-guess"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(url, headers=origin)
            assert refused.value.status == 401
        # A client that is not a browser (no Origin) gets in with the token, and only with it.
        async with session.ws_connect(f"{served.base}/ws?token={TOKEN}") as socket_:
            await _screen(socket_, b"served")
    assert not served.ws.control.exists()


async def test_only_its_own_page_steers_the_loops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp

    async with (
        serving(tmp_path, monkeypatch) as served,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session,
    ):
        await served.cookie(session)
        port = served.port
        for origin in (
            "http://evil.example",
            f"http://evil.example:{port}",
            f"http://127.0.0.1:{port + 1}",
            f"https://127.0.0.1:{port}",
            f"http://localhost:{port}",  # another name, so another site: its cookie is not this one
            "null",
        ):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                async with session.ws_connect(f"{served.base}/ws", headers={"Origin": origin}) as hijacked:
                    await hijacked.send_json(["stdin", "p"])
            assert refused.value.status == 403, origin
        # A name rebound onto 127.0.0.1 (DNS rebinding): the browser sends it as the Host.
        rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(f"{served.base}/ws?token={TOKEN}", headers=rebound)
        assert refused.value.status == 403
        response = await session.get(
            f"{served.base}/?token={TOKEN}", headers={"Host": f"evil.example:{port}"}
        )
        assert response.status == 403
        assert not served.ws.control.exists()

        # The page it served, with its cookie, does reach the loop.
        async with session.ws_connect(
            f"{served.base}/ws?width=120&height=40", headers={"Origin": served.base}
        ) as own:
            await _screen(own, b"iteration")
            await own.send_json(["stdin", "p"])
            [command] = await _control_queue(served.ws)
    assert command["kind"] == "pause" and command["source"] == "tui"


_URL_IN_PAGE = re.compile(
    r"""(?:(?<![.\w])(?:href|src|action|poster)\s*=\s*["']|url\(\s*["']?|@import\s+["'])([^"')\s>]+)"""
)
"""What a page or stylesheet fetches: attributes, CSS `url(...)` (lower case: not JavaScript's
`new URL(...)`), `@import`."""


def _outside(urls: list[str], base: str) -> list[str]:
    """The URLs among `urls` that a browser would fetch from another origin than `base`."""
    from urllib.parse import urljoin, urlsplit

    own = urlsplit(base)
    return [
        url
        for url in urls
        if urlsplit(urljoin(base + "/", url)).netloc not in ("", own.netloc)
        or urlsplit(urljoin(base + "/", url)).scheme not in ("http", "https", "data")
    ]


async def test_the_page_loads_nothing_from_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, the page still has its font: nothing it names (stylesheets, scripts, fonts,
    images) comes from another origin, and what it names from here is served."""
    from urllib.parse import urljoin

    import aiohttp

    async with (
        serving(tmp_path, monkeypatch) as served,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session,
    ):
        await served.cookie(session)
        page = await (await session.get(f"{served.base}/")).text()
        # No address of another site anywhere in the page, but the SVG namespace (never fetched).
        others = set(re.findall(r"https?://[^\s\"'<>)]+", page)) - {"http://www.w3.org/2000/svg"}
        assert not others, others
        named = _URL_IN_PAGE.findall(page)
        assert not _outside(named, served.base), named
        fonts = [u for u in named if u.endswith((".ttf", ".woff", ".woff2"))]
        assert fonts, "the page names no font of its own: the browser would fall back silently"
        for url in named:
            response = await session.get(urljoin(served.base + "/", url))
            assert response.status == 200, url
            if url.endswith(".css"):
                css = await response.text()
                assert not _outside(_URL_IN_PAGE.findall(css), served.base), url
            if url in fonts:
                assert len(await response.read()) > 10_000, url


def test_a_network_host_is_told_it_serves_plain_http() -> None:
    from tui.serve_http import plain_http_warning

    for host in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        assert plain_http_warning(host, 8000) is None, host
    for host in ("0.0.0.0", "::", "192.168.1.9", "my-server.example"):
        line = plain_http_warning(host, 8000)
        assert line is not None and "\n" not in line, host
        assert "plain HTTP" in line and "token" in line and "ssh -L 8000:127.0.0.1:8000 " in line


async def test_serving_on_every_address_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(tmp_path, monkeypatch, TOKEN, "--host", "0.0.0.0") as served:
        await served.printed()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "plain HTTP" not in served.err.read_text():
            await asyncio.sleep(0.05)
    warnings = [line for line in served.err.read_text().splitlines() if "plain HTTP" in line]
    assert len(warnings) == 1 and warnings[0].startswith(
        "loopdeck: warning: --host 0.0.0.0 serves plain HTTP"
    )
    assert f"ssh -L {served.port}:127.0.0.1:{served.port} " in warnings[0]
    assert TOKEN not in served.output()


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

    debug_port = _free_port()
    assert BROWSER is not None
    async with serving(tmp_path, monkeypatch, None) as served:
        address = (await served.printed()).split("open ", 1)[1].split(" ", 1)[0]
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
            await _wait_port(debug_port)
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
                targets = await (await session.get(f"http://127.0.0.1:{debug_port}/json/list")).json()
                url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
                async with session.ws_connect(url, max_msg_size=0) as cdp:
                    page = Page(cdp)
                    await page.call("Network.enable")
                    await page.call("Page.enable")
                    # The address `serve` printed, followed from a link on another site (the
                    # hardest case for a SameSite=Strict cookie): the token becomes a cookie, and
                    # leaves the address.
                    link = f'<a href="{address}">the monitor</a>'
                    await page.call("Page.navigate", url=f"data:text/html,{quote(link)}")
                    clicked = (
                        "document.querySelector('a') !== null && (document.querySelector('a').click(), true)"
                    )
                    deadline = time.monotonic() + 10
                    while not (await page.call("Runtime.evaluate", expression=clicked))["result"]["value"]:
                        assert time.monotonic() < deadline, "the page with the link never loaded"
                        await asyncio.sleep(0.05)
                    # The monitor's status bar, drawn by the monitor process through the websocket.
                    await page.wait_for_text("served")
                    await page.wait_for_text("iteration")
                    # Its font came from this server (offline, a CDN's would never load).
                    font = await page.call(
                        "Runtime.evaluate",
                        expression="document.fonts.load('16px \"Roboto Mono\"')"
                        ".then(fs => fs.length > 0 && fs.every(f => f.status === 'loaded'))",
                        awaitPromise=True,
                    )
                    assert font["result"]["value"] is True, font
                    fetched = await page.call(
                        "Runtime.evaluate",
                        expression="performance.getEntriesByType('resource').map(e => e.name)",
                        returnByValue=True,
                    )
                    assert not _outside(fetched["result"]["value"], served.base), fetched
                    shown = await page.call("Runtime.evaluate", expression="location.href")
                    assert shown["result"]["value"] == f"{served.base}/"
                    await page.call(
                        "Runtime.evaluate",
                        expression="document.querySelector('.xterm-helper-textarea').focus()",
                    )
                    await page.call("Input.dispatchKeyEvent", type="keyDown", key="p", text="p", code="KeyP")
                    await page.call("Input.dispatchKeyEvent", type="keyUp", key="p", code="KeyP")
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline and not _whole_lines(served.ws):
                        with contextlib.suppress(TimeoutError):
                            await page.pump(timeout=0.2)
                    [command] = await _control_queue(served.ws, timeout=1)
                    assert command["kind"] == "pause" and command["source"] == "tui"
        finally:
            browser.terminate()
            try:
                browser.wait(10)
            except subprocess.TimeoutExpired:
                browser.kill()

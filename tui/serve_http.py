"""The web side of `loopdeck serve`: textual-serve's server, with a guard in front of it.

Anyone who reaches the page can steer the loops, and "reaching" includes any web page the person
visits in the same browser: it can open a websocket to 127.0.0.1 (cross-site websocket
hijacking), or point a name of its own at 127.0.0.1 (DNS rebinding). So every request, on every
host:
- names this server in its `Host` (a rebound name does not);
- if the browser says where it comes from (`Origin`), comes from the page this server served;
- carries the token: in `?token=`, which is swapped at once for an HttpOnly, SameSite=Strict
  cookie and a redirect to the same address without it (so it does not stay in the address bar
  or the history), or in that cookie. Both are compared in constant time.

The token never reaches a log: the access log leaves the query string out, and a filter blanks
it (and any `token=` value) from every other line, tracebacks included.

The page works offline: textual-serve's template links its font from Google Fonts, so the page is
its template with that link taken out and the same font (Roboto Mono, shipped in textual-serve's
static folder) served from here; the browser's monospace font stands in if it is missing.

This module imports aiohttp and textual-serve at the top; `tui.serve` imports it only when it
serves, so the monitor processes it starts per browser tab do not pay for them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import hashlib
import hmac
import html
import ipaddress
import json
import logging
import re
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import hdrs, web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_runner import GracefulExit
from textual_serve.server import Server
from yarl import URL

from loop.core.errors import LoopdeckError

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""The names a browser on this machine uses for a server bound to the loopback address."""
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
_HOST_HEADER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?")
_QUERY_TOKEN = re.compile(r"(token=)[^&\s\"'#]*", re.IGNORECASE)
_LOGGERS = (
    "aiohttp",
    "aiohttp.access",
    "aiohttp.server",
    "aiohttp.web",
    "aiohttp.websocket",
    "textual-serve",
    "asyncio",
)


PAGE = "app_index.html"
_REMOTE_LINK = re.compile(r"<link\b[^>]*?\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>", re.IGNORECASE)
_FONT_FACE = (
    '@font-face { font-family: "Roboto Mono"; font-style: STYLE; font-weight: 100 700; '
    'font-display: swap; src: url("{{ config.static.url }}fonts/FILE") format("truetype"); }\n'
)
_FONTS = "".join(
    _FONT_FACE.replace("STYLE", style).replace("FILE", name)
    for style, name in (
        ("normal", "RobotoMono-VariableFont_wght.ttf"),
        ("italic", "RobotoMono-Italic-VariableFont_wght.ttf"),
    )
)


def offline_page(template: str) -> str:
    """textual-serve's page without what it loads from elsewhere (its Google Fonts stylesheet),
    its font named from this server's static folder instead."""
    page = _REMOTE_LINK.sub("", template)
    return page.replace("</head>", f"<style>\n{_FONTS}</style>\n</head>", 1)


def _page_loader(templates: Any) -> jinja2.BaseLoader:
    """The page template, made offline, read from textual-serve's templates folder."""
    folder = jinja2.FileSystemLoader(templates)

    def load(name: str) -> str | None:
        try:
            text, _path, _fresh = folder.get_source(jinja2.Environment(), name)
        except jinja2.TemplateNotFound:
            return None
        return offline_page(text) if name == PAGE else text

    return jinja2.FunctionLoader(load)


def plain_http_warning(host: str, port: int) -> str | None:
    """One line for a server other machines can reach: what travels in the clear, and the safe
    way to reach it from elsewhere. None on a loopback address, which never leaves the machine."""
    name = host.strip("[]").lower()
    if name in LOCAL_HOSTS:
        return None
    try:
        if ipaddress.ip_address(name).is_loopback:
            return None
    except ValueError:
        pass
    return (
        f"loopdeck: warning: --host {host} serves plain HTTP to the network: the token (in the "
        "address, then in a cookie) and everything the page shows travel unencrypted; to open it "
        "from another machine, serve on 127.0.0.1 (the default) and tunnel to it over SSH: "
        f"ssh -L {port}:127.0.0.1:{port} {socket.gethostname()}, then open the address serve prints"
    )


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _same(given: str, expected: str) -> bool:
    """Constant time whatever the lengths (both sides are hashed first)."""
    return hmac.compare_digest(_digest(given), _digest(expected))


@dataclass(frozen=True)
class Guard:
    """What a request must show to reach the monitor."""

    token: str
    port: int
    names: frozenset[str]
    """Host names (lower case) this server answers to."""
    any_address: bool
    """A non-loopback bind also answers to any IP address: a rebound name is never one."""

    @classmethod
    def for_binding(cls, host: str, port: int, token: str) -> Guard:
        local = host.lower() in LOCAL_HOSTS
        names = set(LOCAL_HOSTS)
        if not local:
            names |= {host.lower(), socket.gethostname().lower(), socket.getfqdn().lower()}
            names -= WILDCARD_HOSTS
        return cls(token=token, port=port, names=frozenset(names), any_address=not local)

    @property
    def cookie(self) -> str:
        """Named for the port: cookies are shared by every port of a host."""
        return f"loopdeck_{self.port}"

    @property
    def cookie_value(self) -> str:
        """Derived from the token, so the cookie jar never holds the token itself."""
        return hmac.new(self.token.encode(), b"loopdeck serve cookie", hashlib.sha256).hexdigest()

    def host_name(self, header: str | None) -> tuple[str, int | None] | None:
        """The (name, port) of a `Host` header this server answers to, else None."""
        found = _HOST_HEADER.fullmatch(header or "")
        if found is None:
            return None
        name = found.group(1).lower().strip("[]")
        port = int(found.group(2)) if found.group(2) else None
        if name in self.names:
            return name, port
        if self.any_address:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return None
            return name, port
        return None

    @staticmethod
    def origin_ok(origin: str, scheme: str, host: tuple[str, int | None]) -> bool:
        """The page this server served, and only it: same scheme, name and port."""
        try:
            url = URL(origin)
        except ValueError:
            return False
        if url.scheme not in ("http", "https") or url.host is None or url.path not in ("", "/"):
            return False
        name, port = host
        served_port = port if port is not None else (443 if scheme == "https" else 80)
        return url.scheme == scheme and url.host.lower().strip("[]") == name and url.port == served_port

    def token_ok(self, given: str | None) -> bool:
        return given is not None and _same(given, self.token)

    def cookie_ok(self, given: str | None) -> bool:
        return given is not None and _same(given, self.cookie_value)

    def middleware(self) -> Middleware:
        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            host = self.host_name(request.headers.get(hdrs.HOST))
            if host is None:
                # Not naming the names it does answer to: a rebound page could read them.
                raise web.HTTPForbidden(
                    text="loopdeck: not a name of this server; open the address serve printed\n"
                )
            origin = request.headers.get(hdrs.ORIGIN)
            if origin is not None and not self.origin_ok(origin, request.scheme, host):
                raise web.HTTPForbidden(text="loopdeck: a page from elsewhere may not use this server\n")
            by_query = self.token_ok(request.query.get("token"))
            if not by_query and not self.cookie_ok(request.cookies.get(self.cookie)):
                raise web.HTTPUnauthorized(
                    text="loopdeck: open the address `loopdeck serve` printed (it ends in ?token=…)\n"
                )
            upgrade = request.headers.get(hdrs.UPGRADE, "").lower() == "websocket"
            if by_query and request.method in ("GET", "HEAD") and not upgrade:
                return self._swap_for_cookie(request)
            return await handler(request)

        return guard

    def _swap_for_cookie(self, request: web.Request) -> web.Response:
        """The cookie, and a page that goes on to the same address without the token.

        Not an HTTP redirect: a browser that came by a link on another site would treat the
        redirected request as cross-site and hold the SameSite=Strict cookie back from it (and
        from every reload). A navigation this page starts itself is same-site, and `replace`
        drops the address with the token from the tab's history.
        """
        clean = str(request.rel_url.without_query_params("token"))
        script = json.dumps(clean).replace("<", "\\u003c")
        shown = html.escape(clean, quote=True)
        body = (
            '<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
            f'<meta http-equiv="refresh" content="0; url={shown}"><title>loopdeck</title>'
            f"<script>location.replace({script})</script>"
            f'<p><a href="{shown}">Open the monitor</a></p>\n'
        )
        response = web.Response(text=body, content_type="text/html")
        response.headers[hdrs.CACHE_CONTROL] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.set_cookie(self.cookie, self.cookie_value, httponly=True, samesite="Strict", path="/")
        return response


class Redact(logging.Filter):
    """Blanks the token, and any `token=` value, from a log line and its traceback."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def clean(self, text: str) -> str:
        text = _QUERY_TOKEN.sub(r"\1…", text)
        for secret in self.secrets:
            text = text.replace(secret, "…")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed call: the handler reports it
            return True
        cleaned = self.clean(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info:
            # The text only: a traceback's frames (and their locals) stay out of the log.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
        if record.stack_info:
            record.stack_info = self.clean(record.stack_info)
        return True


REDACT = Redact()


def redact(*secrets: str) -> None:
    """Keep these out of every log line of the loggers a server writes to."""
    REDACT.secrets.update(secrets)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if REDACT not in logger.filters:
            logger.addFilter(REDACT)


class AccessLog(AbstractAccessLogger):
    """One line per request: who, method, path, status; never the query string."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info(
            '%s "%s %s" %s %.3fs', request.remote, request.method, request.path, response.status, time
        )


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, or one line saying why not (a busy port above all)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise LoopdeckError(f"port {port} is in use; give --port") from None
        reason = error.strerror or str(error)
        raise LoopdeckError(
            f"cannot listen on {host} port {port} ({reason}); give another --host or --port"
        ) from None


class MonitorServer(Server):
    """textual-serve's server behind the guard, its page pointing back at the address it was asked
    for (its own `public_url` would send the websocket to another origin when the page was opened
    as `localhost`), with logs that never show the token."""

    def __init__(self, command: str, host: str, port: int, token: str, public_url: str) -> None:
        super().__init__(command, host=host, port=port, title="loopdeck", public_url=public_url)
        self.guard = Guard.for_binding(host, port, token)
        redact(token, self.guard.cookie_value)

    def bound_to(self, sock: socket.socket) -> None:
        """The port the socket got (`--port 0` asks for any free one)."""
        self.port = sock.getsockname()[1]
        self.guard = dataclasses.replace(self.guard, port=self.port)
        redact(self.guard.cookie_value)

    async def _make_app(self) -> web.Application:
        app: web.Application = await super()._make_app()
        aiohttp_jinja2.setup(app, loader=_page_loader(self.templates_path))  # offline: no font CDN
        app.middlewares.append(self.guard.middleware())
        return app

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        context: dict[str, Any] = await _INDEX_CONTEXT(self, request)
        socket_scheme = "wss" if request.scheme == "https" else "ws"
        context["app_websocket_url"] = f"{socket_scheme}://{request.host}/ws"
        context["config"]["static"]["url"] = "/static/"
        return context

    async def on_startup(self, app: web.Application) -> None:
        """Nothing: `loopdeck serve` has already said where to open it."""

    def initialize_logging(self) -> None:
        """Plain lines on stderr (textual-serve's own handler prints a traceback's locals)."""
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.addFilter(REDACT)
        logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

    def serve_on(self, sock: socket.socket) -> None:
        """Serve until Ctrl+C or SIGTERM (first saying so when the network can reach it)."""
        warning = plain_http_warning(self.host, self.port)
        if warning is not None:
            print(warning, file=sys.stderr, flush=True)
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        except NotImplementedError:
            pass
        web.run_app(
            self._make_app(),
            sock=sock,
            access_log_class=AccessLog,
            handle_signals=False,
            loop=loop,
            print=None,
        )

    def request_exit(self) -> None:
        raise GracefulExit()


_INDEX_CONTEXT = Server.handle_index.__wrapped__  # type: ignore[attr-defined]
"""textual-serve's page settings, before its template renders them."""

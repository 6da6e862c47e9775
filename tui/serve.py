"""`loopdeck serve`: the monitor in a web browser, through textual-serve.

textual-serve starts one monitor process per browser tab, by a shell command. No user text may
reach a shell, so the command is fixed (this module, run by this Python) and what the person
asked for (folders, `--scan`) travels in an environment variable as JSON.

Anyone who reaches the page can steer the loops, so it listens on 127.0.0.1 unless told
otherwise, and any other address needs `--token`: the page must be opened with `?token=T` once
(it then sets an HttpOnly, same-site cookie), and every request, the websocket included, is
checked against it in constant time.
"""

from __future__ import annotations

import hmac
import json
import os
import shlex
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loop.errors import LoopdeckError

ENV = "LOOPDECK_SERVE"
"""What the monitor processes open: `{"dirs": [...], "scan": DIR | null, "depth": N}`."""
COOKIE = "loopdeck_token"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def check_binding(host: str, token: str | None) -> None:
    """Refuse to put the monitor on a network without a token (with the reason and the fix)."""
    if host not in LOCAL_HOSTS and not token:
        raise LoopdeckError(
            f"serve --host {host} would let anyone who reaches it steer your loops; give --token T "
            "(a long random secret, opened once as ?token=T) or keep the default --host 127.0.0.1"
        )
    if token is not None and len(token) < 8:
        raise LoopdeckError("--token should be at least 8 characters: it is all that guards the loops")


def child_command() -> str:
    """The fixed command textual-serve runs per browser tab: nothing in it comes from a user."""
    return f"{shlex.quote(sys.executable)} -m tui.serve"


def make_server(
    dirs: list[str], scan: str | None, depth: int, host: str, port: int, token: str | None
) -> Any:
    """A textual-serve `Server` for the monitor, with the token check when there is one."""
    from aiohttp import web
    from textual_serve.server import Server

    check_binding(host, token)
    os.environ[ENV] = json.dumps({"dirs": dirs, "scan": scan, "depth": depth})
    shown = socket.gethostname() if host in ("0.0.0.0", "::") else host
    public = f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"

    class TokenServer(Server):
        async def _make_app(self) -> web.Application:
            app: web.Application = await super()._make_app()
            if token:
                app.middlewares.append(_token_middleware(token))
            return app

    return TokenServer(child_command(), host=host, port=port, title="loopdeck", public_url=public)


Handler = Callable[[Any], Awaitable[Any]]


def _token_middleware(token: str) -> Any:
    from aiohttp import web

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> Any:
        given = request.query.get("token") or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise web.HTTPUnauthorized(text="loopdeck: open this page with ?token=T (the serve --token)\n")
        response = await handler(request)
        if request.query.get("token") and isinstance(response, web.Response):
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
        return response

    return check


def main() -> None:
    """One monitor, in the process textual-serve started for a browser tab."""
    from loop.paths import Workspace
    from tui.monitor import MonitorApp

    asked = json.loads(os.environ.get(ENV) or "{}")
    dirs = [Workspace(Path(d).resolve()) for d in asked.get("dirs") or []]
    scan = asked.get("scan")
    if not dirs and not scan:
        dirs = [Workspace(Path.cwd())]
    MonitorApp(dirs, scan_root=Path(scan) if scan else None, scan_depth=int(asked.get("depth") or 4)).run()


if __name__ == "__main__":
    main()

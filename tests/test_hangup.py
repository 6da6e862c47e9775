"""A monitor whose terminal goes away ends, SIGHUP or none: started in a session of its own, its
terminal closed under it, it quits at once instead of reading the ended terminal forever."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, loopdeck_cmd
from tools import screenshots

pytestmark = pytest.mark.skipif(not hasattr(select, "epoll"), reason="the hang-up watch is Linux's")


def read_until(fd: int, wanted: bytes, timeout: float) -> bool:
    """Read the terminal's output until `wanted` shows in it (bounded)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return False
        try:
            seen += os.read(fd, 65536)
        except OSError:
            return False
    return True


def test_a_monitor_whose_terminal_closes_without_a_hangup_signal_ends(tmp_path: Path) -> None:
    ws = screenshots.running(tmp_path / "ws")
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    monitor = subprocess.Popen(
        [*loopdeck_cmd(), "tui", str(ws.root)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,  # the terminal is not its controlling one: no SIGHUP will come
    )
    os.close(slave)
    try:
        assert read_until(master, b"Journal", 60), "the monitor never drew its screen"
        os.close(master)
        master = -1
        monitor.wait(30)  # it ends by itself; before, it spun a core reading the ended terminal
        assert monitor.returncode == 0
    finally:
        if master >= 0:
            os.close(master)
        if monitor.poll() is None:
            monitor.kill()
            monitor.wait()

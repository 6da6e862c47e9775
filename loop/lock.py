"""The loop lock: an exclusive `flock` on `.claude/orchestrator-loop.lock`, with a timeout.

The kernel releases an flock when its holder dies, so a hook killed mid-Stop never leaves a
stale lock behind (a failure reported against other loops: resume blocked by its own lock).
This is what the `filelock` package does on Unix; it is written here because importing
`filelock` costs the Stop hook ~20 ms (it pulls in `logging` and `inspect`) on every agent turn.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path


class LockTimeoutError(Exception):
    pass


class FileLock:
    """Reentrant within one object; exclusive across processes and across objects."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        if self._depth:
            self._depth += 1
            return
        # O_NOFOLLOW: a lock file planted as a symlink must not make loopdeck create its target
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + self.timeout
        pause = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockTimeoutError(str(self.path)) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        self._fd = fd
        self._depth = 1

    def release(self) -> None:
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

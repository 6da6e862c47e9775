"""The loop lock: an exclusive `flock` on `.claude/orchestrator-loop.lock`, with a timeout.

The kernel releases an flock when its holder dies, so a hook killed mid-Stop never leaves a
stale lock behind (a failure reported against other loops: resume blocked by its own lock).
The `filelock` package takes an flock too, but knows nothing of who holds it: this lock records
its holder, so one a dead process left behind is broken and said (below).

The holder writes its pid into the lock file. An flock outlives its holder only when another
process still has the holder's open file (a child forked without exec): then the lock is
stale. A lock that times out while its recorded holder is dead is broken (the file is
replaced by a fresh one, and the caller is told, to journal it); a live holder's lock never is,
nor one whose holder cannot be told (the timeout error names the pid instead).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from loop.store.proc import alive


class LockTimeoutError(Exception):
    pass


class FileLock:
    """Reentrant within one object; exclusive across processes and across objects."""

    def __init__(self, path: Path, timeout: float, on_break: Callable[[int], None] | None = None) -> None:
        self.path = path
        self.timeout = timeout
        self.on_break = on_break
        """Told the dead holder's pid when a stale lock is broken (to journal it)."""
        self._fd: int | None = None
        self._depth = 0
        self.holder: int | None = None
        """Who held the lock when acquiring it timed out (for the error)."""

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
                    holder = _holder(fd)
                    self.holder = holder
                    if holder is not None and holder != os.getpid() and _dead(holder) and self._break(fd):
                        os.close(fd)
                        if self.on_break is not None:
                            self.on_break(holder)
                        return self.acquire()
                    os.close(fd)
                    raise LockTimeoutError(str(self.path)) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        mine = f"{os.getpid()}\n".encode()
        with contextlib.suppress(OSError):
            if os.pread(fd, 32, 0) != mine:  # a driver locks twice a turn: it says who once
                os.ftruncate(fd, 0)
                os.pwrite(fd, mine, 0)
        self._fd = fd
        self._depth = 1

    def _break(self, fd: int) -> bool:
        """Replace a stale lock file by a fresh one (only if it is still the one we read)."""
        try:
            if os.stat(self.path, follow_symlinks=False).st_ino != os.fstat(fd).st_ino:
                return True  # someone replaced it already: just try again
            os.unlink(self.path)
        except OSError:
            return False
        return True

    def release(self) -> None:
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _holder(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    return None


def _dead(pid: int) -> bool:
    return alive(pid) is False

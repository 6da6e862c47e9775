"""The working tree watched for git with inotify, read by the monitor's event loop.

watchfiles watched the whole tree: its thread received every event of every file (each open and
read, each of loopdeck's own writes under `.claude/`) only for a Python filter to drop most of
them, and its Python side woke every `step` even while nothing changed. Here only folders whose
changes can count for git are watched (`tui.watch.TreeRules`: not `.claude/`, not what
`.gitignore` or `.git/info/exclude` ignores, of `.git/` only HEAD, the index and the branches),
for changes only (no open, read or close-without-write); the descriptor is read by the event
loop when the kernel has something, so nothing runs while nothing changes. A folder that
appears is watched with what it already holds; one that goes is forgotten. A burst of changes
is handed over once it has been quiet for `GIT_DEBOUNCE_MS`, or has lasted `GIT_BURST_MS`.

Where inotify cannot be had (not Linux) or runs out of watches (a huge tree: `ENOSPC`), the
constructor, `start()` or `changes()` raises `OSError` and the monitor uses watchfiles.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno as errnos
import os
from collections.abc import AsyncGenerator
from pathlib import Path

from tui import inotify
from tui.inotify import IN_CREATE, IN_IGNORED, IN_ISDIR, IN_MOVED_FROM, IN_MOVED_TO, IN_Q_OVERFLOW
from tui.watch import GIT_BURST_MS, GIT_DEBOUNCE_MS, TreeRules

MASK = inotify.MASK | inotify.IN_ONLYDIR
"""Changes only: written, attributes, made, moved, removed (IN_OPEN, IN_ACCESS and
IN_CLOSE_NOWRITE are not asked for: reading the tree wakes nobody)."""
EXHAUSTED = (errnos.ENOSPC, errnos.ENOMEM)
"""No watches (or kernel memory) left: this tree is too big for inotify here."""


class TreeWatch:
    """An inotify descriptor over the working tree at `root`. `await start()` watches the tree
    (walked in a thread); `changes()` yields the paths that counted, one list per burst;
    `close()` (or leaving the `async with`) lets it go."""

    def __init__(
        self,
        root: Path,
        quiet_s: float = GIT_DEBOUNCE_MS / 1000,
        burst_s: float = GIT_BURST_MS / 1000,
    ) -> None:
        libc = inotify.load_libc()
        if libc is None:
            raise OSError("inotify is not available here")
        self.libc = libc
        fd = libc.inotify_init1(inotify.IN_NONBLOCK | inotify.IN_CLOEXEC)
        if fd < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        self.fd = fd
        self.root = str(root)
        self.rules = TreeRules(root)
        self.quiet_s = quiet_s
        self.burst_s = burst_s
        self.folders: dict[int, str] = {}
        """Watch descriptor → the folder it watches."""
        self.wakeups = 0
        """How often the kernel woke the event loop for this watch (what it costs)."""
        self.events = 0
        self.counted: dict[str, None] = {}
        """The paths that counted in the burst going on."""
        self.ready: dict[str, None] = {}
        """Bursts over, not yet handed over (merged)."""
        self.failed: OSError | None = None
        self.began = self.last = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None

    # --- the watches ---------------------------------------------------------------------------

    def add(self, folder: str) -> bool:
        """Watch `folder` (not through a link, unless it is the root). False when there is
        nothing to watch: gone, a file or a link by now, or unreadable. OSError when no
        watches are left."""
        flags = MASK if folder == self.root else MASK | inotify.IN_DONT_FOLLOW
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(folder), flags)
        if wd < 0:
            errno = ctypes.get_errno()
            if errno in EXHAUSTED or folder == self.root:
                raise OSError(errno, os.strerror(errno), folder)
            return False
        self.folders[wd] = folder
        return True

    def walk(self, folder: str) -> None:
        """Watch `folder` and every folder under it the rules keep, each before it is listed:
        a folder made meanwhile is either in the listing or reported by its parent's watch."""
        stack = [folder]
        while stack:
            current = stack.pop()
            if not self.add(current):
                continue
            try:
                with os.scandir(current) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False) and self.rules.descends(entry.path):
                            stack.append(entry.path)
            except OSError:
                continue  # gone or unreadable meanwhile

    def forget(self, folder: str) -> None:
        """Stop watching `folder` and what is under it (moved away: it may be moved to a
        place the rules leave out, or out of the tree)."""
        inside = folder + "/"
        for wd, watched in list(self.folders.items()):
            if watched == folder or watched.startswith(inside):
                self.libc.inotify_rm_watch(self.fd, wd)
                del self.folders[wd]

    async def start(self) -> TreeWatch:
        """Watch the tree: the walk runs in a thread (a big tree takes a while), and the
        descriptor is let go once it is over if the caller is cancelled meanwhile."""
        walking = asyncio.ensure_future(asyncio.to_thread(self.walk, self.root))

        def close_after(done: asyncio.Future[None]) -> None:
            if not done.cancelled():
                done.exception()  # seen: the walk of a watch nobody waits for any more
            self.close()

        try:
            await asyncio.shield(walking)
        except asyncio.CancelledError:
            walking.add_done_callback(close_after)
            raise
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.folders.clear()

    async def __aenter__(self) -> TreeWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # --- the events ----------------------------------------------------------------------------

    def read(self) -> bool:
        """Take the events waiting: watch the folders that appeared, forget those that went,
        note the paths that count for git. Whether any did (an overflow of the kernel's queue
        counts: something changed, and the tree is walked again for folders missed)."""
        counted = False
        for wd, mask, name in inotify.events(self.fd):
            self.events += 1
            if mask & IN_Q_OVERFLOW:
                self.walk(self.root)
                self.counted[self.root] = None
                counted = True
                continue
            if mask & IN_IGNORED:  # removed, or let go by `forget`
                self.folders.pop(wd, None)
                continue
            folder = self.folders.get(wd)
            if folder is None:
                continue  # queued before its watch was let go
            path = os.path.join(folder, os.fsdecode(name)) if name else folder
            if name and mask & IN_ISDIR:
                if mask & IN_MOVED_FROM:
                    self.forget(path)
                elif mask & (IN_CREATE | IN_MOVED_TO) and self.rules.descends(path):
                    self.walk(path)
            if self.rules.accepts(path):
                self.counted[path] = None
                counted = True
        return counted

    def _readable(self) -> None:
        """The kernel has events: read them all now (a new folder must be watched before
        what is written into it is missed), and time the burst."""
        self.wakeups += 1
        try:
            counted = self.read()
        except OSError as exc:  # no watches left for a new folder
            self.failed = exc
            self._hand_over()
            return
        if counted and self._loop is not None:
            now = self._loop.time()
            self.last = now
            if self._timer is None:
                self.began = now
                self._timer = self._loop.call_at(now + self.quiet_s, self._burst_over)

    def _burst_over(self) -> None:
        """The burst's timer: over once quiet for `quiet_s` or `burst_s` after it began; else
        the timer waits on (moved once per check, not once per event)."""
        assert self._loop is not None
        due = min(self.last + self.quiet_s, self.began + self.burst_s)
        if self._loop.time() < due - 0.001:
            self._timer = self._loop.call_at(due, self._burst_over)
            return
        self._timer = None
        self.ready.update(self.counted)
        self.counted = {}
        self._hand_over()

    def _hand_over(self) -> None:
        if self._due is not None:
            self._due.set()

    async def changes(self) -> AsyncGenerator[list[str], None]:
        """The paths that counted, one list per burst, as bursts end. OSError when a folder
        that appeared could not be watched (no watches left)."""
        loop = self._loop = asyncio.get_running_loop()
        due = self._due = asyncio.Event()
        fd = self.fd
        loop.add_reader(fd, self._readable)
        try:
            while self.fd >= 0:
                await due.wait()
                due.clear()
                if self.failed is not None:
                    raise self.failed
                if self.ready:
                    paths, self.ready = list(self.ready), {}
                    yield paths
        finally:
            loop.remove_reader(fd)

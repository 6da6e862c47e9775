"""Linux's inotify on the monitor's event loop: the loop files watched without any polling.

watchfiles hands changes over from a thread that wakes every `step` milliseconds (and takes
the interpreter's lock to ask whether to stop): an idle monitor paid for fifty wake-ups a
second, and a change waited up to two steps. inotify's descriptor is read by the event loop
itself when the kernel has something: nothing runs while nothing changes, and a change is
handed over as soon as its burst is over (`QUIET_S`, `BURST_S`).

Folders are watched one level deep, as the monitor asks (`tui.watch.watch_paths`); the working
tree, recursively, by `tui.tree_watch` on the same pieces. Elsewhere than Linux (or when
inotify cannot be had: no watches left), `available()` says so and the monitor uses watchfiles.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
import sys
from collections.abc import AsyncGenerator, Iterable, Iterator
from pathlib import Path

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
MASK |= IN_DELETE_SELF | IN_MOVE_SELF
EVENT = struct.Struct("iIII")
"""`struct inotify_event`: wd, mask, cookie, len, then `len` bytes of name."""
QUIET_S = 0.025
"""A burst (a driver's decision: the task file, journal lines, the state's temp file and
rename) is over once nothing more has happened for this long..."""
BURST_S = 0.060
"""... or once it has lasted this long: then it is handed over as one change (one snapshot
for what a decision wrote, not one per file)."""


def load_libc() -> ctypes.CDLL | None:
    """The C library with inotify's calls, or None (not Linux, or a libc without them)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1  # noqa: B018 - present, or AttributeError
        libc.inotify_add_watch  # noqa: B018
        libc.inotify_rm_watch  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def available() -> bool:
    return load_libc() is not None


def events(fd: int) -> Iterator[tuple[int, int, bytes]]:
    """The events waiting on the descriptor `fd` (non-blocking), as (wd, mask, name), until
    there are none."""
    while True:
        try:
            data = os.read(fd, 64 * 1024)
        except BlockingIOError:
            return
        pos = 0
        while pos + EVENT.size <= len(data):
            wd, mask, _cookie, size = EVENT.unpack_from(data, pos)
            yield wd, mask, data[pos + EVENT.size : pos + EVENT.size + size].rstrip(b"\0")
            pos += EVENT.size + size


class Watch:
    """An inotify descriptor watching `folders` (one level deep). `changes()` yields the paths
    that changed, a burst at a time; `close()` (or leaving the `async with`) lets it go."""

    def __init__(self, folders: Iterable[str | Path]) -> None:
        libc = load_libc()
        if libc is None:
            raise OSError("inotify is not available here")
        self.libc = libc
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        self.fd = fd
        self.folders: dict[int, str] = {}
        try:
            for folder in folders:
                self.add(folder)
        except BaseException:
            self.close()
            raise

    def add(self, folder: str | Path) -> None:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(folder), MASK)
        if wd < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), str(folder))
        self.folders[wd] = str(folder)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def read(self) -> list[str]:
        """The paths of the events waiting, each once (a folder's own path when it moved or
        went, or when the kernel's queue overflowed: something changed, look). A file written
        in many pieces (`sed -i`'s temp file) makes as many events: one path."""
        paths: dict[str, None] = {}
        for wd, mask, name in events(self.fd):
            folder = self.folders.get(wd)
            if mask & IN_Q_OVERFLOW or folder is None:
                paths.update(dict.fromkeys(self.folders.values()))
            elif mask & IN_IGNORED:
                self.folders.pop(wd, None)
            elif name:
                paths[os.path.join(folder, os.fsdecode(name))] = None
            else:
                paths[folder] = None
        return list(paths)

    async def changes(self) -> AsyncGenerator[list[str], None]:
        """Bursts of changed paths, as they happen."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        fd = self.fd

        def wake() -> None:  # once per burst: the descriptor stays readable until it is read
            loop.remove_reader(fd)
            ready.set()

        loop.add_reader(fd, wake)
        try:
            while self.fd >= 0:
                await ready.wait()
                ready.clear()
                paths = self.read()
                ends = loop.time() + BURST_S
                while (left := ends - loop.time()) > 0:  # until the burst is over, not later
                    await asyncio.sleep(min(QUIET_S, left))
                    more = self.read()
                    if not more:
                        break
                    paths.extend(p for p in more if p not in paths)
                loop.add_reader(fd, wake)
                if paths:
                    yield paths
        finally:
            loop.remove_reader(fd)

"""Opening files without being tricked: no writes through symlinks, no reads that block.

loopdeck writes its own files (journal, control queue, iteration logs and prompts, the state
file's temp and backup copies) under the workspace's `.claude/`, a folder the agent can write
to as well. A symlink planted there (`iterations/0001.prompt.md -> ~/.bashrc`, or `.claude`
itself pointing elsewhere) would turn loopdeck's next write into an overwrite of a file the
agent could not otherwise touch. So every such write goes through `open_write`, which refuses
a symlink as the last component (`O_NOFOLLOW`), a parent folder that resolves outside the
workspace's `.claude/`, and anything but a regular file (a FIFO there would block the writer).
Lines are appended by `append_bytes`, whole or not at all: a torn line never runs into the next.

The task sources read files named by the agent or its transcript: a FIFO there would block the
Stop hook forever and a device could be endless. `open_regular` opens without blocking and
accepts regular files only.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from pathlib import Path
from typing import BinaryIO

from loop.core.errors import LoopdeckError

CLAUDE_DIR = ".claude"


class UnsafePath(LoopdeckError):
    """A loopdeck file would be written through a symlink or outside the workspace's `.claude/`."""


class NotRegularFile(OSError):
    """A file to read is a FIFO, device, socket or folder. An OSError, so every reader's
    existing "cannot be read" handling reports it."""


def _claude_dir(path: Path) -> Path | None:
    """The `.claude` folder `path` lives under (the nearest), or None."""
    for parent in path.parents:
        if parent.name == CLAUDE_DIR:
            return parent
    return None


def check_parent(path: Path) -> None:
    """Refuse when `path`'s folder is, or resolves, outside the workspace's `.claude/`.

    A `.claude` that is itself a symlink is refused: its target is somewhere loopdeck was
    never asked to write. Files not under any `.claude` (tests, caches elsewhere) are only
    protected by `O_NOFOLLOW`.
    """
    path = path.absolute()
    claude = _claude_dir(path)
    if claude is None:
        return
    if claude.is_symlink():
        raise UnsafePath(
            f"{claude} is a symlink (to {os.readlink(claude)}); loopdeck writes its files only "
            "inside a real .claude folder of the workspace"
        )
    if path.parent == claude:
        return  # the journal, the state's copies: their folder is `.claude` itself, checked just now
    root = os.path.realpath(claude)
    parent = os.path.realpath(path.parent)
    if os.path.commonpath([root, parent]) != root:
        raise UnsafePath(
            f"{path.parent} resolves to {parent}, outside {claude}; refusing to write {path.name} there"
        )


def make_parents(path: Path) -> None:
    """`mkdir -p` for `path`'s folder, after checking it stays inside `.claude/` (and again
    after making it: what was made must be inside too). A folder already there is left as it
    is, checked once: every journal line and state write passes here."""
    check_parent(path)
    if os.path.isdir(path.parent):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    check_parent(path)


def open_write(path: Path, flags: int, mode: int = 0o644, access: int = os.O_WRONLY) -> int:
    """`os.open(path, access | flags)` (`access` O_WRONLY or O_RDWR) that never follows a
    symlink at `path`, never writes outside the workspace's `.claude/` and never opens anything
    but a regular file: a FIFO planted there would block the writer until someone reads it (the
    Stop hook, forever), a device would take whatever is written. Raises UnsafePath saying which."""
    make_parents(path)
    try:
        fd = _open(path, access | os.O_NOFOLLOW | os.O_CLOEXEC | flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and path.is_symlink()):
            raise UnsafePath(f"{path} is a symlink; loopdeck does not write through symlinks") from None
        if exc.errno == errno.ENXIO:  # a FIFO (or socket) nobody reads: refused, not waited on
            raise UnsafePath(f"{path} {_not_regular(path)}") from None
        raise
    try:
        file_mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(file_mode):
            raise UnsafePath(f"{path} {_not_regular(path, file_mode)}")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open(path: Path, flags: int, mode: int) -> int:
    """`os.open` without blocking on a FIFO. A regular file under a lease (a file server's
    oplock) answers a non-blocking open with EAGAIN: that one is opened waiting, as usual."""
    try:
        return os.open(path, flags | os.O_NONBLOCK, mode)
    except BlockingIOError:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise
        return os.open(path, flags, mode)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _not_regular(path: Path, mode: int | None = None) -> str:
    if mode is None:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return "is not a regular file; loopdeck writes its files only as regular files"
    return f"is {_kind(mode)}, not a regular file; loopdeck writes its files only as regular files"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class ShortWrite(OSError):
    """An append that could not be written whole (a full disk, a file size limit). What part of
    it reached the file was taken back out, or, when another writer appended after it, stays a
    torn line of its own that readers skip."""

    maybe_whole = False
    """Only the newline was missing and the part could not be taken back out: the next append
    ends that line, and a reader may take it whole (a race on a full disk, told, not hidden)."""


def append_bytes(path: Path, data: bytes) -> None:
    """Append one line (`data` ends with a newline) in one `write()` on an `O_APPEND`
    descriptor, so concurrent writers never interleave inside a line, and never let a torn line
    swallow the next one:

    * a file that does not end with a newline (an earlier append cut short, a writer killed
      mid-write) gets one first, so what was torn stays a line of its own (one readers skip as
      not JSON) instead of running into this one;
    * a write cut short is taken back out (the file truncated to where this append began) and
      raises ShortWrite, an OSError: a failed append leaves nothing, or a line readers skip.

    Appenders hold an `flock` on the file for the look and the write (`_lock_briefly`).
    """
    fd = open_write(path, os.O_APPEND | os.O_CREAT, access=os.O_RDWR)
    try:
        _lock_briefly(fd)  # the look at the last byte and the write, as one among appenders
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            written = os.write(fd, data)
        except OSError as exc:
            _take_back(fd, size)  # an error is a write of nothing; a write of part is undone
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        if written != len(data):
            left = _take_back(fd, os.lseek(fd, 0, os.SEEK_CUR) - written)
            error = ShortWrite(
                errno.ENOSPC,
                f"only {written} of {len(data)} bytes could be written (is the disk full?); "
                + (
                    "the partial line stays as a torn line that readers skip" if left else "nothing was added"
                ),
                str(path),
            )
            # All but the newline, and another writer's line after it: a reader may take it whole.
            error.maybe_whole = left and written == len(data) - 1
            raise error
    finally:
        os.close(fd)


APPEND_LOCK_WAIT = 2.0
"""How long an append waits for another appender's `flock` before going on without it."""


def _lock_briefly(fd: int) -> None:
    """Take an exclusive `flock` on the file appended to (released when it is closed), so no
    other appender's line is half-way in when this one looks at the last byte: a reader can see
    a write in progress without its newline yet, and would start a line that needs no start.
    Best effort: a holder stuck past APPEND_LOCK_WAIT, or a file system without locks, costs at
    worst an empty line, which readers skip."""
    deadline = time.monotonic() + APPEND_LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.001)
        except OSError:
            return


def _take_back(fd: int, start: int) -> bool:
    """Truncate what this descriptor appended from `start` on, unless someone appended after it
    (their line must not go with it). True when part of this append is left in the file."""
    end = os.lseek(fd, 0, os.SEEK_CUR)  # an O_APPEND write leaves the offset after its bytes
    if end <= start:
        return False  # nothing of this append reached the file
    try:
        if os.fstat(fd).st_size != end:
            return True
        os.ftruncate(fd, start)
    except OSError:
        return True
    return False


def write_bytes(path: Path, data: bytes) -> None:
    """Create or truncate `path` and write `data`, refusing a symlink in its place."""
    fd = open_write(path, os.O_CREAT | os.O_TRUNC)
    try:
        _write_all(fd, data)
    except OSError as exc:
        if exc.filename is None:  # a full disk: say which file
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    finally:
        os.close(fd)


def open_append(path: Path) -> BinaryIO:
    """A binary file object appending to `path` (iteration logs), opened as `append_bytes` is."""
    return os.fdopen(open_write(path, os.O_APPEND | os.O_CREAT), "ab")


def open_regular(path: str | Path) -> BinaryIO:
    """`open(path, "rb")` for regular files only, and without blocking on the way in: a FIFO,
    device, socket or folder raises NotRegularFile (an OSError) instead of hanging or reading
    forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"is {_kind(mode)}, not a regular file", str(path))
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def read_regular(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most `limit`), as `open_regular` opens it.

    A read of `limit` bytes allocates `limit` bytes first: a state or task file of a few KB
    read under a limit of 64 MB cost the monitor a 64 MB mapping per read, and its heap grew
    with what was left between them. The file's size (and a byte more, to see it grew) is read;
    the rest, up to the limit, only when there is more."""
    with open_regular(path) as f:
        if limit is None:
            return f.read()
        size = os.fstat(f.fileno()).st_size
        data = f.read(min(limit, size + 1))
        if size < len(data) < limit:  # it grew while read
            data += f.read(limit - len(data))
        return data

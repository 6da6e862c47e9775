"""Opening files without being tricked: no writes through symlinks, no reads that block.

loopdeck writes its own files (journal, control queue, iteration logs and prompts, the state
file's temp and backup copies) under the workspace's `.claude/`, a folder the agent can write
to as well. A symlink planted there (`iterations/0001.prompt.md -> ~/.bashrc`, or `.claude`
itself pointing elsewhere) would turn loopdeck's next write into an overwrite of a file the
agent could not otherwise touch. So every such write goes through `open_write`, which refuses
a symlink as the last component (`O_NOFOLLOW`) and a parent folder that resolves outside the
workspace's `.claude/`.

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
from pathlib import Path

from loop.errors import LoopdeckError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import BinaryIO

CLAUDE_DIR = ".claude"


class UnsafePath(LoopdeckError):
    """A loopdeck file would be written through a symlink or outside the workspace's `.claude/`."""


class NotRegularFile(OSError):
    """A file to read is a FIFO, device, socket or folder. An OSError, so every reader's
    existing "cannot be read" handling reports it."""


def _claude_dir(path: Path) -> Path | None:
    """The `.claude` folder `path` lives under (the nearest), or None."""
    for parent in path.absolute().parents:
        if parent.name == CLAUDE_DIR:
            return parent
    return None


def check_parent(path: Path) -> None:
    """Refuse when `path`'s folder is, or resolves, outside the workspace's `.claude/`.

    A `.claude` that is itself a symlink is refused: its target is somewhere loopdeck was
    never asked to write. Files not under any `.claude` (tests, caches elsewhere) are only
    protected by `O_NOFOLLOW`.
    """
    claude = _claude_dir(path)
    if claude is None:
        return
    if claude.is_symlink():
        raise UnsafePath(
            f"{claude} is a symlink (to {os.readlink(claude)}); loopdeck writes its files only "
            "inside a real .claude folder of the workspace"
        )
    root = os.path.realpath(claude)
    parent = os.path.realpath(path.absolute().parent)
    if os.path.commonpath([root, parent]) != root:
        raise UnsafePath(
            f"{path.parent} resolves to {parent}, outside {claude}; refusing to write {path.name} there"
        )


def make_parents(path: Path) -> None:
    """`mkdir -p` for `path`'s folder, after checking it stays inside `.claude/`."""
    check_parent(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    check_parent(path)


def open_write(path: Path, flags: int, mode: int = 0o644) -> int:
    """`os.open(path, O_WRONLY | flags)` that never follows a symlink at `path` and never
    writes outside the workspace's `.claude/`. Raises UnsafePath saying which."""
    make_parents(path)
    try:
        return os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and path.is_symlink()):
            raise UnsafePath(f"{path} is a symlink; loopdeck does not write through symlinks") from None
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` in one `write()` on an `O_APPEND` descriptor (lines never interleave)."""
    fd = open_write(path, os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes) -> None:
    """Create or truncate `path` and write `data`, refusing a symlink in its place."""
    fd = open_write(path, os.O_CREAT | os.O_TRUNC)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def open_append(path: Path) -> BinaryIO:
    """A binary file object appending to `path` (iteration logs), opened as `append_bytes` is."""
    return os.fdopen(open_write(path, os.O_APPEND | os.O_CREAT), "ab")


def open_regular(path: Path) -> BinaryIO:
    """`open(path, "rb")` for regular files only, and without blocking on the way in: a FIFO,
    device, socket or folder raises NotRegularFile (an OSError) instead of hanging or reading
    forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a folder"
                if stat.S_ISDIR(mode)
                else "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "a device"
            )
            raise NotRegularFile(errno.EINVAL, f"is {kind}, not a regular file", str(path))
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most `limit`), as `open_regular` opens it."""
    with open_regular(path) as f:
        return f.read() if limit is None else f.read(limit)

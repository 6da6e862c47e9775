"""The loop's state: the Ralph loop's `.claude/orchestrator-loop.local.md`, extended.

The file is YAML front matter plus the loop's prompt as the body, so a person can open it,
read it and (carefully) edit it, and so other tools that read the Ralph loop's file keep working.

Three promises, each tested:

* A round trip changes nothing it does not have to: the body byte for byte, unknown keys and
  their order, and the exact text of every key whose value did not change.
* A write never leaves a half-written file: temp file in the same folder, fsync, rename, under
  an exclusive lock with a timeout; the previous good file is kept as `….bak`.
* A corrupt file is reported with its path, line and problem, and is never overwritten.

This module is the file (its lock, its backup, its writes); what its text may hold, and how it
is read and written, is `loop.store.statetext`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from loop.core.errors import LockTimeout, os_problem
from loop.core.model import ACTIVE_STATUSES, DRIVERS, KNOWN_KEYS, NULL, STATUSES, LoopState, same_loop
from loop.core.timeutil import utcnow
from loop.store import gitexclude
from loop.store.frontmatter import atomic_write
from loop.store.journal import Journal
from loop.store.lock import FileLock, LockTimeoutError
from loop.store.paths import Workspace
from loop.store.proc import alive
from loop.store.safeopen import NotRegularFile, make_parents, read_regular
from loop.store.statetext import (
    FIELD_CAPS,
    MAX_STATE_BYTES,
    StateError,
    Unstorable,
    parse,
    render,
    storable,
)

__all__ = [
    "ACTIVE_STATUSES",
    "DRIVERS",
    "FIELD_CAPS",
    "KNOWN_KEYS",
    "MAX_STATE_BYTES",
    "NULL",
    "STATUSES",
    "LoopState",
    "StateError",
    "StateStore",
    "parse",
    "render",
    "storable",
]

_HEX = frozenset("0123456789abcdef")


def _identity(info: os.stat_result) -> tuple[int, ...]:
    """A file's identity and last change: another write shows in one of them (its ctime cannot
    be set back)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _orphan_pid(name: str, state_name: str) -> int | None:
    """The writer's pid in a temp file's name (`.<state>.<pid>.<hex>.tmp`, or the backup's hard
    link `.<state>.bak.<pid>.<hex>` and its `.tmp`), None for any other name. Read by hand: a
    pattern built from the state's name would be compiled on every Stop that writes."""
    prefix = f".{state_name}."
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    rest = rest.removeprefix("bak.").removesuffix(".tmp")
    pid, dot, tag = rest.partition(".")
    if not (dot and pid.isdecimal() and tag and _HEX.issuperset(tag)):
        return None
    return int(pid)


class StateStore:
    """Reads and writes one workspace's state file; the only door to it.

    `locked()` is reentrant: a driver holds it across read-decide-write, and the `write()` inside
    takes it again without deadlocking.
    """

    def __init__(self, workspace: Workspace, lock_timeout: float = 10.0) -> None:
        self.workspace = workspace
        self.path = workspace.state
        self.lock_timeout = lock_timeout
        self._lock: FileLock | None = None
        self._written: tuple[int, ...] | None = None
        """The `stat` of the file as this store last wrote it: still that file, it needs no
        second look before it becomes the backup (a driver writes it at every decision)."""
        self._fresh: tuple[tuple[int, ...], LoopState] | None = None
        """The state this store last wrote, as its check parsed it back, and that file's
        identity: the next `read` of the same file takes it instead of parsing the file again
        (a driver reads the state it wrote at every decision). Taken once: nobody else holds it."""
        self._swept = False
        """Whether this store's first write swept the orphans of killed writers: once a
        process is enough (a Stop is a process; the runner, one for the whole loop)."""

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> LoopState | None:
        """The state, None when there is no loop, StateError when the file is not a state."""
        fresh, self._fresh = self._fresh, None
        if fresh is not None:
            try:
                if _identity(os.stat(self.path)) == fresh[0]:
                    return fresh[1]
            except OSError:
                pass  # gone or unreadable: read as it is, and said so
        try:
            data = read_regular(self.path, MAX_STATE_BYTES + 1)  # a FIFO must not hang the hook
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise StateError(self.path, "is a folder, expected the loop's state file") from None
        except NotRegularFile as exc:
            raise StateError(self.path, f"{exc.strerror}, expected the loop's state file") from None
        except NotADirectoryError as exc:  # `.claude` a file: say so, not "Not a directory"
            raise StateError(self.path, f"cannot be read ({os_problem(exc)})") from None
        except OSError as exc:
            raise StateError(self.path, f"cannot be read: {exc.strerror}") from None
        return parse(data, self.path)

    def read_backup(self) -> LoopState | None:
        try:
            data = read_regular(self.workspace.backup, MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(self.workspace.backup, f"cannot be read: {exc.strerror}") from None
        return parse(data, self.workspace.backup)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        if self._lock is None:
            make_parents(self.workspace.lock)  # not inside a symlinked .claude
            gitexclude.ensure(self.workspace.root)  # loopdeck's files stay out of `git status`
            self._lock = FileLock(self.workspace.lock, timeout=self.lock_timeout, on_break=self._lock_broken)
        try:
            self._lock.acquire()
        except LockTimeoutError:
            holder = f" (pid {self._lock.holder}, alive)" if self._lock.holder else ""
            raise LockTimeout(
                f"{self.workspace.lock}: another loopdeck process{holder} held the loop lock for more "
                f"than {self.lock_timeout:g} s"
            ) from None
        try:
            yield
        finally:
            self._lock.release()

    def _lock_broken(self, pid: int) -> None:
        """A stale lock (its holder dead) was broken: the journal says so."""
        Journal(self.workspace.journal).append("lock-broken", None, {"pid": pid})

    def write(self, state: LoopState, *, replace_corrupt: bool = False) -> None:
        """Atomically replace the state file, keeping the previous good one as the backup.

        A corrupt file in the way is an error (it may be a person's half-finished edit), unless
        `replace_corrupt`, which moves it aside as `….corrupt-<time>` rather than deleting it.
        What is written is parsed back first: a state loopdeck could not read is never written
        (StateError instead, naming the problem), because the next Stop would fail on it.
        """
        data, parsed = self._checked(state)
        self._fresh = None
        with self.locked():
            self._keep_previous(replace_corrupt)
            atomic_write(self.path, data, durable=True)
            self._written = _identity(os.stat(self.path))
            self._fresh = (self._written, parsed)
            if not self._swept:
                self._swept = True
                self._sweep_orphans()

    def checked(self, state: LoopState) -> bytes:
        """The bytes `write` would write, or StateError when they would not read back."""
        return self._checked(state)[0]

    def _checked(self, state: LoopState) -> tuple[bytes, LoopState]:
        """`checked`'s bytes, and the state they read back as."""
        try:
            data = render(state).encode("utf-8")
        except (Unstorable, UnicodeError, RecursionError) as exc:
            raise StateError(self.path, f"refusing to write the state: {exc}") from None
        try:
            parsed = parse(data, self.path)
        except StateError as exc:
            raise StateError(
                self.path, f"refusing to write a state that would not read back ({exc.problem})", exc.line
            ) from None
        return data, parsed

    def restore_backup(self) -> LoopState:
        """Put the last good copy back, moving the corrupt file aside (never deleting it)."""
        with self.locked():
            backup = self.read_backup()
            if backup is None:
                raise StateError(self.workspace.backup, "no backup to restore")
            if self.path.exists():
                self._move_aside()
            atomic_write(self.path, read_regular(self.workspace.backup, MAX_STATE_BYTES + 1), durable=True)
            return backup

    def _keep_previous(self, replace_corrupt: bool) -> None:
        """The file about to be replaced becomes the backup: renamed there through a hard link
        (no copy, no second fsync). One this store wrote itself is known good and clean; any
        other is read first (a corrupt one is refused or moved aside, one holding what a write
        redacts is rewritten clean)."""
        try:
            if self._written is not None and _identity(os.stat(self.path)) == self._written:
                self._link_backup()
                return
            current = self.path.read_bytes()
        except FileNotFoundError:
            return
        try:
            previous = parse(current, self.path)
        except StateError as exc:
            if not replace_corrupt:
                raise StateError(
                    self.path, f"refusing to overwrite a corrupt state file ({exc.problem})", exc.line
                ) from None
            self._move_aside()
            return
        clean = self._clean_copy(previous, current)
        if clean is not current:
            atomic_write(self.workspace.backup, clean, durable=True)
            return
        self._link_backup(current)

    def _link_backup(self, current: bytes | None = None) -> None:
        """The state file, as it is, becomes the backup: a hard link renamed over it."""
        backup = self.workspace.backup
        link = backup.with_name(f".{backup.name}.{os.getpid()}.{os.urandom(4).hex()}")
        try:
            os.link(self.path, link)
        except OSError:  # a file system without hard links: a copy, then
            atomic_write(backup, self.path.read_bytes() if current is None else current, durable=True)
        else:
            os.replace(link, backup)

    def _clean_copy(self, previous: LoopState, current: bytes) -> bytes:
        """The backup's bytes: `current` itself when writing it again would not change a byte
        (every file this loopdeck wrote), else it as it would be written now, if that reads
        back: a file an older loopdeck or a person wrote may hold what a write redacts (a token
        in the prompt), and the backup must not keep it."""
        try:
            data = render(previous).encode("utf-8")
        except (Unstorable, UnicodeError, RecursionError):
            return current
        if data == current:
            return current
        try:
            parse(data, self.path)
        except StateError:
            return current
        return data

    def _sweep_orphans(self) -> None:
        """Remove temp files left by writers that were killed mid-write (SIGKILL, power cut):
        the state's `.….<pid>.<hex>.tmp`, and the backup's hard link `.….bak.<pid>.<hex>` and
        its `.tmp`, whenever the pid that made them is dead. At a store's first write only:
        the folder is listed once a process, not at each of a runner's thousands of writes."""
        for entry in os.scandir(self.path.parent):
            pid = _orphan_pid(entry.name, self.path.name)
            if pid is None or entry.is_dir(follow_symlinks=False):
                continue
            if pid != os.getpid() and alive(pid) is False:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)

    def newest_corrupt(self, since: datetime) -> Path | None:
        """The corrupt state file moved aside last (`….corrupt-<time>[.n]`, the time it was
        moved), if that was at `since` or later: what a person is told to look at."""
        prefix = self.path.name + ".corrupt-"

        def moved(path: Path) -> tuple[str, int]:
            stamp, _dot, n = path.name[len(prefix) :].partition(".")
            return stamp, int(n) if n.isdigit() else 1

        try:
            found = [p for p in self.path.parent.glob(prefix + "*") if moved(p)[0] >= _stamp(since)]
        except OSError:
            return None
        return max(found, key=moved, default=None)

    def _move_aside(self) -> None:
        stamp = _stamp(utcnow())
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():  # two in one second: the earlier one is kept too
            n += 1
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}.{n}")
        os.replace(self.path, target)


def _stamp(when: datetime) -> str:
    """A moved-aside corrupt state's time, in its name."""
    return when.strftime("%Y%m%dT%H%M%S")


def current_loop(ws: Workspace, journal: Journal) -> tuple[str, str] | None:
    """Which loop the folder holds now (its `started_at` and `loop_id`, "" when it has none),
    even when its state file is corrupt: the file's own `started_at` and `loop_id` lines if
    they can be read, else the journal's last `loop-started`; None when neither says."""
    import re

    try:
        data = ws.state.read_bytes()[: 1024 * 1024]
    except OSError:
        data = b""
    found = re.search(rb"^started_at:[ \t]*[\"']?([0-9T:+.Z-]{10,40})[\"']?[ \t]*\r?$", data, re.MULTILINE)
    if found:
        ident = re.search(rb"^loop_id:[ \t]*[\"']?([0-9A-Za-z]{1,64})[\"']?[ \t]*\r?$", data, re.MULTILINE)
        return found.group(1).decode("ascii"), ident.group(1).decode("ascii") if ident else ""
    last = journal.tail(1, where=lambda e: e.kind == "loop-started", budget=64 * 1024 * 1024).events
    started = last[0].data.get("started_at") if last else None
    if not (isinstance(started, str) and started):
        return None
    ident = last[0].data.get("loop_id")
    return started, ident if isinstance(ident, str) else ""


def backup_of_this_loop(ws: Workspace) -> bool:
    """Is the backup a copy of the loop the folder holds now (not of one archived before it)?"""
    try:
        backup = StateStore(ws).read_backup()
    except StateError:
        return False
    if backup is None:
        return False
    current = current_loop(ws, Journal(ws.journal))
    return current is None or same_loop(backup.started_at, backup.loop_id, *current)

"""The loop's journal: `.claude/orchestrator-loop.events.jsonl`, append-only, one event a line.

Every driver and the CLI append here; the TUI and `loopdeck log` read it. Appends are one
`write()` on an `O_APPEND` descriptor, so concurrent writers never interleave inside a line.
The reader assumes nothing about the file: a torn last line (a writer killed mid-write) or a
line of garbage is skipped and reported, never fatal.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from loop.core.events import KINDS, message, render_line
from loop.core.model import JournalEvent as Event
from loop.core.redact import redact_obj
from loop.core.timeutil import iso_ms, utcnow
from loop.store.safeopen import append_bytes, open_regular
from loop.store.tailread import ReadCounter, lines_backwards

__all__ = [
    "KINDS",
    "Event",
    "Follower",
    "Journal",
    "Problem",
    "ReadResult",
    "decode_line",
    "message",
    "render_line",
]

MAX_LINE_BYTES = 1024 * 1024
"""An event is small; a longer line is garbage (or an attack on the reader's memory)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """A line the reader skipped, and why: shown to people, never raised."""

    offset: int
    reason: str
    excerpt: str = ""

    def __str__(self) -> str:
        return f"byte {self.offset}: {self.reason}" + (f" ({self.excerpt})" if self.excerpt else "")


@dataclass(slots=True)
class ReadResult:
    events: list[Event]
    problems: list[Problem]
    offset: int = 0
    """Where the next forward read should start (the end of the last complete line)."""
    bytes_read: int = 0


def decode_line(line: bytes, offset: int, terminated: bool) -> Event | Problem:
    """One journal line as an Event, or the Problem that explains why it is not one."""
    if len(line) > MAX_LINE_BYTES:
        return Problem(offset, f"line of {len(line)} bytes is too long for an event")
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):  # garbage, torn, or nested too deep
        reason = "torn last line (no newline, not JSON)" if not terminated else "not JSON"
        return Problem(offset, reason, _excerpt(line))
    if not isinstance(obj, dict):
        return Problem(offset, "not a JSON object", _excerpt(line))
    ts, kind, iteration, data = obj.get("ts"), obj.get("kind"), obj.get("iteration"), obj.get("data")
    if not isinstance(ts, str) or not isinstance(kind, str):
        return Problem(offset, "missing 'ts' or 'kind' string", _excerpt(line))
    if iteration is not None and (not isinstance(iteration, int) or isinstance(iteration, bool)):
        iteration = None
    if not isinstance(data, dict):
        data = {} if data is None else {"value": data}
    return Event(ts=ts, kind=kind, iteration=iteration, data=data)


def _excerpt(line: bytes) -> str:
    return line[:60].decode("utf-8", "replace").encode("unicode_escape").decode("ascii")


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(
        self,
        kind: str,
        iteration: int | None = None,
        data: Mapping[str, Any] | None = None,
        now: datetime | None = None,
    ) -> Event:
        """Append one event. Every string in `data` is redacted here, once, so no caller can
        leak a token into the journal; the file is never written through a symlink."""
        if kind not in KINDS:
            raise ValueError(f"unknown journal event kind {kind!r}: add it to loop.core.events.KINDS")
        event = Event(iso_ms(now or utcnow()), kind, iteration, redact_obj(dict(data or {})))
        line = json.dumps(event.to_json(), ensure_ascii=False, default=str) + "\n"
        append_bytes(self.path, line.encode("utf-8", "replace"))
        return event

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def tail(
        self, n: int, where: Callable[[Event], bool] | None = None, budget: int | None = None
    ) -> ReadResult:
        """The last `n` events (oldest first) that pass `where`, reading backwards only as far as
        needed: until `n` have matched, or `budget` bytes from the end were read.

        A filter that matches rarely (or never) would otherwise read the whole journal, which
        grows without bound: a caller polling for one recent event gives a `budget`. The line
        cut by the budget's edge is passed over, not reported: it was only half read.
        """
        counter = ReadCounter()
        events: list[Event] = []
        problems: list[Problem] = []
        try:
            f = open_regular(self.path)  # a FIFO planted as the journal must not hang a reader
        except FileNotFoundError:
            return ReadResult([], [], 0, 0)
        with f:
            end = f.seek(0, os.SEEK_END)
            stop = max(0, end - budget) if budget is not None else 0
            if n > 0:
                for offset, line, terminated in lines_backwards(f, end, stop=stop, counter=counter):
                    if offset == stop and stop > 0:
                        break  # cut by the budget: maybe only the end of a line
                    if not line.strip():
                        continue
                    item = decode_line(line, offset, terminated)
                    if isinstance(item, Problem):
                        problems.append(item)
                    elif where is None or where(item):
                        events.append(item)
                        if len(events) >= n:
                            break
        events.reverse()
        problems.reverse()
        return ReadResult(events, problems, end, counter.bytes_read)

    def read_from(self, offset: int = 0, limit_bytes: int = 8 * 1024 * 1024) -> ReadResult:
        """Complete lines from `offset` on: what `log -f` and the TUI follow with.

        A last line without its newline is left for the next read (its writer may be mid-write).
        If the file shrank below `offset` (a new loop replaced it), reading starts over.
        """
        try:
            f = open_regular(self.path)  # a FIFO planted as the journal must not hang a reader
        except FileNotFoundError:
            return ReadResult([], [], 0, 0)
        with f:
            size = f.seek(0, os.SEEK_END)
            if offset > size:
                offset = 0
            f.seek(offset)
            data = f.read(min(limit_bytes, size - offset))
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) >= limit_bytes:
                # One line longer than the whole window: skip it rather than stall on it forever.
                skipped = Problem(offset, f"line longer than {limit_bytes} bytes skipped")
                return ReadResult([], [skipped], _next_line_start(f, offset + len(data), size))
        events: list[Event] = []
        problems: list[Problem] = []
        pos = offset
        for line in data[:cut].split(b"\n")[:-1]:
            if line.strip():
                item = decode_line(line, pos, True)
                if isinstance(item, Problem):
                    problems.append(item)
                else:
                    events.append(item)
            pos += len(line) + 1
        return ReadResult(events, problems, offset + cut, len(data))


def _next_line_start(f: BinaryIO, pos: int, size: int) -> int:
    f.seek(pos)
    while chunk := f.read(1024 * 1024):
        newline = chunk.find(b"\n")
        if newline != -1:
            return pos + newline + 1
        pos += len(chunk)
    return size


class Follower:
    """The journal's last `n` events, kept up to date by reading only what was appended since
    the last look: a viewer that reads the journal at every change (several times an iteration)
    pays for the new lines, not for the `n` it shows. A journal replaced (another file) or cut
    shorter is read again from its end; an unfinished last line waits for its newline."""

    def __init__(self, path: Path, n: int) -> None:
        self.path = path
        self.n = n
        self.events: deque[Event] = deque(maxlen=n)
        self.offset: int | None = None
        """Where the next read starts: the end of the last complete line read."""
        self.file: tuple[int, int] | None = None
        """The (device, inode) followed: another file under the name is a new journal."""
        self.shown: tuple[Event, ...] = ()

    def read(self) -> tuple[Event, ...]:
        """The last `n` events, oldest first."""
        try:
            info = os.stat(self.path)
        except OSError:
            self._reset()
            return ()
        file = (info.st_dev, info.st_ino)
        if self.offset is None or file != self.file or info.st_size < self.offset:
            self._reset()
            self.file = file
            self._load()
        elif info.st_size > self.offset:
            found = Journal(self.path).read_from(self.offset)
            if found.offset >= self.offset:
                self.events.extend(found.events)
                self.offset = found.offset
            else:  # shrank between the look and the read: start again next time
                self._reset()
        if len(self.shown) != len(self.events) or (self.events and self.shown[-1] is not self.events[-1]):
            self.shown = tuple(self.events)
        return self.shown

    def _reset(self) -> None:
        self.events.clear()
        self.offset = None
        self.file = None
        self.shown = ()

    def _load(self) -> None:
        """The last `n` complete lines, read backwards from the end."""
        try:
            f = open_regular(self.path)
        except OSError:
            return
        found: list[Event] = []
        with f:
            end = f.seek(0, os.SEEK_END)
            complete = end
            for offset, line, terminated in lines_backwards(f, end):
                if not terminated:  # a writer mid-line: it is read whole, next time
                    complete = offset
                    continue
                if not line.strip():
                    continue
                item = decode_line(line, offset, terminated)
                if isinstance(item, Event):
                    found.append(item)
                    if len(found) >= self.n:
                        break
        found.reverse()
        self.events.extend(found)
        self.offset = complete

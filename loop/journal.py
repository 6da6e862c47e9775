"""The loop's journal: `.claude/orchestrator-loop.events.jsonl`, append-only, one event a line.

Every driver and the CLI append here; the TUI and `loopdeck log` read it. Appends are one
`write()` on an `O_APPEND` descriptor, so concurrent writers never interleave inside a line.
The reader assumes nothing about the file: a torn last line (a writer killed mid-write) or a
line of garbage is skipped and reported, never fatal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from loop.redact import redact_obj
from loop.safeopen import append_bytes, open_regular
from loop.tailread import ReadCounter, lines_backwards
from loop.timeutil import human_duration, iso_ms, log_stamp, utcnow

MAX_LINE_BYTES = 1024 * 1024
"""An event is small; a longer line is garbage (or an attack on the reader's memory)."""


@dataclass(frozen=True)
class Event:
    ts: str
    kind: str
    iteration: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "kind": self.kind, "iteration": self.iteration, "data": dict(self.data)}


@dataclass(frozen=True)
class Problem:
    """A line the reader skipped, and why: shown to people, never raised."""

    offset: int
    reason: str
    excerpt: str = ""

    def __str__(self) -> str:
        return f"byte {self.offset}: {self.reason}" + (f" ({self.excerpt})" if self.excerpt else "")


@dataclass
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
    except (ValueError, UnicodeDecodeError):
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
        event = Event(iso_ms(now or utcnow()), kind, iteration, redact_obj(dict(data or {})))
        line = json.dumps(event.to_json(), ensure_ascii=False, default=str) + "\n"
        append_bytes(self.path, line.encode("utf-8", "replace"))
        return event

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def tail(self, n: int, where: Callable[[Event], bool] | None = None) -> ReadResult:
        """The last `n` events (oldest first), reading backwards only as far as needed."""
        counter = ReadCounter()
        events: list[Event] = []
        problems: list[Problem] = []
        try:
            f = open_regular(self.path)  # a FIFO planted as the journal must not hang a reader
        except FileNotFoundError:
            return ReadResult([], [], 0, 0)
        with f:
            end = f.seek(0, os.SEEK_END)
            if n > 0:
                for offset, line, terminated in lines_backwards(f, end, counter=counter):
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


# --- human log lines (seed 003 §4.4.7) ------------------------------------------------------


def _of(iteration: int | None, data: Mapping[str, Any]) -> str:
    limit = data.get("max_iterations")
    return f"{iteration}/{limit}" if limit else f"{iteration}"


_MESSAGES: dict[str, Callable[[Event], str]] = {
    "loop-started": lambda e: f"Loop started (max {e.data.get('max_iterations', '?')} iterations)",
    "iteration-started": lambda e: f"Starting iteration {_of(e.iteration, e.data)}",
    "iteration-completed": lambda e: (
        f"Iteration {e.iteration} complete ({human_duration(e.data.get('duration_s'))})"
    ),
    "task-selected": lambda e: f'Selected item: "{e.data.get("task", "?")}"',
    "blocked": lambda e: f"Stop blocked: {e.data.get('message', 'work remains')}",
    "allowed": lambda e: f"Stop allowed: {e.data.get('reason', '')}".rstrip(": "),
    "verification-started": lambda e: f"Running verification: {e.data.get('command', '?')}",
    "verification-passed": lambda e: f"Verification PASSED (exit {e.data.get('exit_code', 0)})",
    "verification-failed": lambda e: f"Verification FAILED (exit {e.data.get('exit_code', '?')})",
    "question": lambda e: f"QUESTION from the agent: {e.data.get('question', '')}",
    "answered": lambda e: f"Answered: {e.data.get('answer', '')}",
    "runner-started": lambda e: f"Runner started (pid {e.data.get('pid', '?')}): {e.data.get('agent', '?')}",
    "agent-failed": lambda e: (
        f"Agent FAILED (attempt {e.data.get('attempt', '?')} of {e.data.get('of', '?')}): "
        f"{e.data.get('reason', '')}"
    ),
    "agent-interrupted": lambda e: f"Agent ended early: {e.data.get('reason', '')}",
    "retry": lambda e: f"Retrying in {e.data.get('in_s', '?')} s",
    "verification-mode": lambda e: f"All task sources empty: {e.data.get('loops', '?')} verification loops",
    "verification-interrupted": lambda e: f"Back to work: {e.data.get('reason', '')}",
    "verification-skipped": lambda e: f"Verification loop {e.data.get('loop', '?')} skipped",
    "session-bound": lambda e: f"Loop bound to session {e.data.get('session_id', '?')}",
    "task-skipped": lambda e: f'Task skipped: "{e.data.get("task", "?")}"',
    "archived": lambda e: f"Loop archived in {e.data.get('folder', '?')}",
    "verification-loop": lambda e: f"Verification loop {e.data.get('loop', '?')} of {e.data.get('of', '?')}",
    "commit": lambda e: f"Committing changes ({e.data.get('sha', '')[:8]})".replace(" ()", ""),
    "escalation": lambda e: f"ESCALATION: {e.data.get('reason', '')}",
    "command-sent": lambda e: f"Command queued: {e.data.get('command', '?')} ({e.data.get('source', '?')})",
    "command-applied": lambda e: (
        f"Command applied: {e.data.get('command', '?')}"
        + (f" — {e.data['outcome']}" if e.data.get("outcome") else "")
    ),
    "completed": lambda e: f"Loop complete: {e.data.get('reason', '')}".rstrip(": "),
    "paused": lambda e: "Loop paused" + (f": {e.data['reason']}" if e.data.get("reason") else ""),
    "resumed": lambda e: "Loop resumed",
    "stopped": lambda e: "Loop stopped" + (f": {e.data['reason']}" if e.data.get("reason") else ""),
    "failed": lambda e: f"Loop FAILED: {e.data.get('reason', '')}",
    "warning": lambda e: f"WARNING: {e.data.get('message', '')}",
    "error": lambda e: f"ERROR: {e.data.get('message', '')}",
}


def message(event: Event) -> str:
    render = _MESSAGES.get(event.kind)
    if render is not None:
        try:
            return render(event)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    details = " ".join(f"{k}={v}" for k, v in event.data.items())
    return f"{event.kind} {details}".rstrip()


def render_line(event: Event, name: str = "loopdeck") -> str:
    """`[2025-01-17T14:00:00Z] loopdeck: Starting iteration 1/5`, as seed 003 logs it."""
    return f"[{log_stamp(event.ts)}] {name}: {message(event)}"

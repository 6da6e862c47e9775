"""Source 4: Claude Code's TODO list, i.e. the latest `TodoWrite` call in the session transcript.

Transcripts reach hundreds of MB and the hook asks on every Stop, so the whole transcript is
never parsed: the file is searched backwards in blocks for the bytes `"TodoWrite"`, and only
a line holding them is decoded. The answer and the byte offset it covers are remembered under
`.claude/loopdeck/`, so the next look reads only what was appended since.

The first look at a transcript reads at most its last `FIRST_LOOK` bytes: a session that never
called TodoWrite would otherwise be read whole on its first Stop (391 ms at 1 GB). A list last
written further back than that is stale; the cache then remembers "no list up to here", so later
looks stay as cheap as the bytes appended since.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from loop.sources.base import MAX_ITEMS, SourceReport, TaskItem, unavailable
from loop.store.frontmatter import atomic_write
from loop.store.safeopen import open_regular

NAME = "todos"
NEEDLE = b'"TodoWrite"'
BLOCK = 1024 * 1024
MAX_LINE = 64 * 1024 * 1024
"""A line this long is a tool result, not a TodoWrite call: it is passed over, not decoded."""

FIRST_LOOK = 8 * 1024 * 1024
"""How far back from the end the first look at a transcript searches."""

_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "done"}


@dataclass(frozen=True, slots=True)
class Found:
    """The latest TodoWrite list, and where its line starts."""

    todos: list[dict[str, Any]] | None
    offset: int | None


@dataclass(slots=True)
class Scan:
    found: Found
    scanned_to: int
    """Offset just past the last complete line seen: the next look starts here."""
    bytes_read: int = 0


def _todos_of(line: bytes) -> list[dict[str, Any]] | None:
    """The todos of an assistant line that calls TodoWrite, else None (a user line, text that
    merely mentions TodoWrite, a torn line…)."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or obj.get("type") != "assistant":
        return None
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return None
    for block in reversed(content):
        if (
            isinstance(block, dict)
            and block.get("type") == "tool_use"
            and block.get("name") == "TodoWrite"
            and isinstance(block.get("input"), dict)
        ):
            todos = block["input"].get("todos")
            if isinstance(todos, list):
                return [t for t in todos if isinstance(t, dict)]
    return None


def _is_value(f: BinaryIO, chunk: bytes, lo: int, at: int) -> bool:
    """Is the needle a JSON value (`"name":"TodoWrite"`) rather than text inside a string
    (where its quotes would be escaped, as in a tool result that quotes a transcript)?"""
    before = chunk[max(0, at - 8) : at]
    if at < 8 and lo > 0:
        f.seek(max(0, lo + at - 8))
        before = f.read(min(8, lo + at))
    return before.rstrip(b" \t\r\n").endswith(b":")


def _line_bounds(f: BinaryIO, pos: int, size: int, counter: list[int]) -> tuple[int, int]:
    """Start and end (exclusive, before its newline) of the line that holds byte `pos`."""
    start = pos
    while start > 0:
        step = min(BLOCK, start)
        f.seek(start - step)
        chunk = f.read(step)
        counter[0] += len(chunk)
        newline = chunk.rfind(b"\n")
        if newline != -1:
            start = start - step + newline + 1
            break
        start -= step
        if pos - start > MAX_LINE:
            return -1, -1
    end = pos
    f.seek(end)
    while end < size:
        chunk = f.read(BLOCK)
        counter[0] += len(chunk)
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline != -1:
            return start, end + newline
        end += len(chunk)
        if end - start > MAX_LINE:
            return -1, -1
    return start, -1  # no newline after it: the last line, still being written


def scan(path: Path, start: int = 0, aligned: bool = True) -> Scan:
    """Find the latest TodoWrite call between byte `start` and the end of the file.

    `aligned`: a line starts at `start` (the end of the last look), so a call on the first line
    needs no read before `start` to find where its line begins."""
    counter = [0]
    with open_regular(path) as f:  # a FIFO or device transcript is unreadable, not a hang
        size = f.seek(0, os.SEEK_END)
        tail_start = max(start, size - BLOCK)
        f.seek(tail_start)
        tail = f.read(size - tail_start)
        counter[0] += len(tail)
        last_newline = tail.rfind(b"\n")
        scanned_to = tail_start + last_newline + 1 if last_newline != -1 else start
        pos = tail_start
        while last_newline == -1 and pos > start:
            # The last line (still being written) is longer than a block: find where it starts.
            step = min(BLOCK, pos - start)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            counter[0] += len(chunk)
            last_newline = chunk.rfind(b"\n")
            if last_newline != -1:
                scanned_to = pos + last_newline + 1
        hi = scanned_to  # only complete lines are decoded; a torn last line is for next time
        while hi > start:
            lo = max(start, hi - BLOCK)
            # Overlap by len(NEEDLE) - 1 so a needle across the block edge is still found.
            chunk_end = min(hi + len(NEEDLE) - 1, size)
            if lo >= tail_start:
                chunk = tail[lo - tail_start : chunk_end - tail_start]
            else:
                f.seek(lo)
                chunk = f.read(chunk_end - lo)
                counter[0] += len(chunk)
            next_hi = lo
            at = chunk.rfind(NEEDLE)
            while at != -1:
                if not _is_value(f, chunk, lo, at):
                    at = chunk.rfind(NEEDLE, 0, at)
                    continue
                before = chunk.rfind(b"\n", 0, at)
                after = chunk.find(b"\n", at)
                first: int | None = before + 1
                if before == -1:  # the line starts before the chunk, or at `start` when aligned
                    first = 0 if lo == start and aligned else None
                whole = first is not None and after != -1
                if first is not None and after != -1:
                    line_start, line_end = lo + first, lo + after
                else:
                    line_start, line_end = _line_bounds(f, lo + at, size, counter)
                if line_start < 0 or line_end < 0:  # absurdly long line: look before the needle
                    at = chunk.rfind(NEEDLE, 0, at)
                    continue
                if whole:
                    line = chunk[first:after]
                else:
                    f.seek(line_start)
                    line = f.read(line_end - line_start)
                    counter[0] += len(line)
                todos = _todos_of(line)
                if todos is not None:
                    return Scan(Found(todos, line_start), scanned_to, counter[0])
                if line_start <= lo:
                    next_hi = max(line_start, start)
                    break
                at = chunk.rfind(NEEDLE, 0, line_start - lo)
            hi = next_hi
    return Scan(Found(None, None), scanned_to, counter[0])


class Lookup:
    """The latest TODO list of one transcript, remembering the last look on disk."""

    def __init__(self, cache_dir: Path | None) -> None:
        self.cache_path = cache_dir / "todos-cache.json" if cache_dir is not None else None
        self.bytes_read = 0

    def latest(self, transcript: Path) -> Found:
        st = transcript.stat()
        ident = [str(transcript.resolve()), st.st_dev, st.st_ino]
        cached = self._load()
        start = 0
        previous = Found(None, None)
        if cached is not None and cached.get("ident") == ident and cached.get("scanned_to", 0) <= st.st_size:
            start = int(cached["scanned_to"])
            previous = Found(cached.get("todos"), cached.get("offset"))
            if start == st.st_size:
                self.bytes_read = 0
                return previous
        aligned = True
        if start == 0 and st.st_size > FIRST_LOOK:
            start, aligned = st.st_size - FIRST_LOOK, False
        result = scan(transcript, start, aligned)
        self.bytes_read = result.bytes_read
        found = result.found if result.found.todos is not None else previous
        self._save(
            {"ident": ident, "scanned_to": result.scanned_to, "todos": found.todos, "offset": found.offset}
        )
        return found

    def _load(self) -> dict[str, Any] | None:
        if self.cache_path is None:
            return None
        try:
            data = json.loads(self.cache_path.read_bytes())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _save(self, data: dict[str, Any]) -> None:
        if self.cache_path is None:
            return
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.cache_path, json.dumps(data, ensure_ascii=False).encode())
        except OSError:
            pass  # a cache that cannot be written only costs time


def report(found: Found, now: str, detail: str, path: str | None = None) -> SourceReport:
    counts = {"pending": 0, "in_progress": 0, "done": 0}
    items: list[TaskItem] = []
    for index, todo in enumerate(found.todos or []):
        raw = todo.get("status")
        status = _STATUS.get(raw, str(raw)) if isinstance(raw, str) else "pending"
        if status in counts:
            counts[status] += 1
        if len(items) < MAX_ITEMS:
            title = todo.get("content") or todo.get("activeForm") or ""
            items.append(TaskItem(title=str(title), status=status, id=str(todo.get("id", index + 1))))
    return SourceReport(
        NAME,
        enabled=True,
        available=True,
        items=tuple(items),
        checked_at=now,
        detail=detail,
        path=path,
        pending=counts["pending"],
        in_progress=counts["in_progress"],
        done=counts["done"],
    )


def check(transcript: Path | None, now: str, cache_dir: Path | None) -> SourceReport:
    if transcript is None:
        return SourceReport(
            NAME,
            enabled=True,
            available=True,
            checked_at=now,
            detail="no transcript known yet (the hook records it at the first Stop)",
        )
    try:
        found = Lookup(cache_dir).latest(transcript)
    except FileNotFoundError:
        # The TODO list lives only in the transcript: with no transcript there is no list to
        # count, and the other sources decide (a lagging or missing file must not trap the agent).
        return SourceReport(
            NAME,
            enabled=True,
            available=True,
            checked_at=now,
            detail=f"{transcript} not found: no TODO list counted",
            warnings=(f"{transcript}: no such transcript",),
            path=str(transcript),
        )
    except IsADirectoryError:
        return unavailable(NAME, f"{transcript}: is a folder, expected a .jsonl transcript", now)
    except OSError as exc:
        return unavailable(NAME, f"{transcript}: cannot be read ({exc.strerror})", now)
    detail = str(transcript) if found.todos is not None else f"{transcript} (no TodoWrite call yet)"
    return report(found, now, detail, str(transcript))


def transcript_for(claude_home: Path, cwd: Path, session_id: str) -> Path | None:
    """`~/.claude/projects/<cwd, / and other non-alphanumerics as ->/<session>.jsonl`."""
    text = str(cwd)
    for folder in (re.sub(r"[^A-Za-z0-9]", "-", text), text.replace("/", "-")):
        candidate = claude_home / "projects" / folder / f"{session_id}.jsonl"
        if candidate.exists():
            return candidate
    return None

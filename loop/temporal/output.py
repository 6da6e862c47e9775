"""A remote turn's output, for the monitor's Output panel: the worker reads its agent's log as
it grows and sends the last lines, as a person reads them, with every heartbeat; the monitor
fetches the turns' last heartbeats from the server and appends what is new to a file of its
own, which the panel follows as it follows a local worker's log.

The lines are the adapters' live lines (`loop.agents.live_line`: the agent's words and tool
calls, not its raw JSON), redacted and scrubbed of the worker's secrets before they leave it, as
everything a worker sends is. A heartbeat keeps only the last `LINES` lines and the count of all
so far, so the monitor knows which are new and says how many it missed. No Temporal import.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LINES = 40
"""Lines of the agent's output each heartbeat carries."""
LINE_CHARS = 1000
READ_BYTES = 256 * 1024
"""At most this much of the log is read per look (an agent printing faster is skipped ahead)."""


@dataclass
class Tail:
    """The worker's side: the last lines of the agent's log, rendered and scrubbed."""

    worker: str
    task: str
    turn: int
    scrub: Callable[[str], str] = lambda text: text
    agent: str | None = None
    """The CLI whose output is read (its adapter renders the lines)."""
    count: int = 0
    """Lines shown so far in this turn."""
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=LINES))
    path: Path | None = None
    offset: int = 0
    partial: bytes = b""
    detail: dict[str, Any] = field(default_factory=dict)
    """What the next heartbeat sends: replaced whole on each look (the heartbeat's thread
    reads it while the turn's looks it)."""

    def follow(self, path: Path, agent: str | None, note: str | None = None) -> None:
        """Read `path` from its start from now on (another agent took the turn over)."""
        self.path, self.agent, self.offset, self.partial = path, agent, 0, b""
        if note:
            self.add([note])

    def look(self) -> None:
        """The lines added to the log since the last look."""
        if self.path is None:
            return
        try:
            with self.path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size - self.offset > READ_BYTES:
                    self.offset, self.partial = size - READ_BYTES, b""
                handle.seek(self.offset)
                data = handle.read(size - self.offset)
        except OSError:
            return
        self.offset += len(data)
        data = self.partial + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.partial = data
            return
        self.partial = data[cut + 1 :]
        from loop.agents import live_line

        shown: list[str] = []
        for raw in data[:cut].decode("utf-8", "replace").split("\n"):
            if raw.strip():
                said = live_line(raw, self.agent)
                shown.extend(part[:LINE_CHARS] for part in (said or "").splitlines() if part.strip())
        self.add(shown)

    def add(self, lines: list[str]) -> None:
        if not lines:
            return
        for line in lines:
            self.lines.append(self.scrub(line))
        self.count += len(lines)
        self.detail = self.now()

    def now(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "task": self.task,
            "turn": self.turn,
            "agent": self.agent or "",
            "count": self.count,
            "lines": list(self.lines),
        }

    def last(self) -> dict[str, Any]:
        return self.detail or self.now()


def turn_of(detail: Any) -> dict[str, Any] | None:
    """A heartbeat's detail as a turn's output, None for any other (a merge's, an old worker's)."""
    if not isinstance(detail, dict):
        return None
    if not isinstance(detail.get("worker"), str) or not isinstance(detail.get("lines"), list):
        return None
    if not isinstance(detail.get("turn"), int) or not isinstance(detail.get("count"), int):
        return None
    return detail


def log_name(worker: str, turn: int) -> str:
    """The mirror's file of a worker's turn: named as the local driver names its logs."""
    return f"{worker}.{turn:02d}.log"


@dataclass
class Mirror:
    """The monitor's side: each remote turn's lines, appended to a file under `folder` as they
    come (`workers/<worker>.<turn>.log`), the lines it missed between two looks said as such."""

    folder: Path
    seen: dict[str, int] = field(default_factory=dict)
    """File name → lines of the turn written so far."""

    def path(self, worker: str, turn: int) -> Path:
        from loop.repo.worktrees import safe_name

        return self.folder / "workers" / log_name(safe_name(worker), turn)

    def take(self, details: list[Any]) -> list[Path]:
        """The turns' last heartbeats: what is new in each, appended to its file. The files
        that grew."""
        grown = []
        for detail in details:
            turn = turn_of(detail)
            if turn is None:
                continue
            path = self.path(turn["worker"], turn["turn"])
            key = path.name
            had = self.seen.get(key)
            if had is None:
                had = _lines_in(path)  # a monitor opened again: goes on from its file
            count, lines = int(turn["count"]), [str(line) for line in turn["lines"]]
            first = count - len(lines)
            if count <= had:
                self.seen[key] = had
                continue
            new = lines[max(0, had - first) :]
            out = []
            if first > had:
                out.append(f"… {first - had} lines not fetched")
            out.extend(line.replace("\n", " ") for line in new)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write("".join(line + "\n" for line in out))
            self.seen[key] = count
            grown.append(path)
        return grown


def _lines_in(path: Path) -> int:
    """Lines of the turn a file holds already (the notes of missed lines count what they
    stand for)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    count = 0
    for line in text.splitlines():
        if line.startswith("… ") and line.endswith(" lines not fetched"):
            number = line[2:].split(" ", 1)[0]
            count += int(number) if number.isdigit() else 0
        else:
            count += 1
    return count

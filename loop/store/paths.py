"""Where a workspace keeps loopdeck's files.

All of them live under `.claude/` next to Claude Code's own settings, so one `.gitignore`
line (`.claude/*.local.*`, `.claude/orchestrator-loop.*`) keeps them out of commits.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

STATE_NAME = "orchestrator-loop.local.md"
BACKUP_NAME = STATE_NAME + ".bak"
"""A constant, not a name made on each use: a `Path` interns its parts, and a long-running
reader that made this name afresh on every look took a new entry in the interpreter's table of
interned strings each time."""
JOURNAL_NAME = "orchestrator-loop.events.jsonl"
CONTROL_NAME = "orchestrator-loop.control.jsonl"
LOCK_NAME = "orchestrator-loop.lock"
RALPH_NAME = "ralph-loop.local.md"


@dataclass(frozen=True, slots=True)
class Workspace:
    """A project folder and the paths of loopdeck's files inside it."""

    root: Path

    @property
    def claude_dir(self) -> Path:
        return self.root / ".claude"

    @property
    def state(self) -> Path:
        return self.claude_dir / STATE_NAME

    @property
    def backup(self) -> Path:
        return self.claude_dir / BACKUP_NAME

    @property
    def journal(self) -> Path:
        return self.claude_dir / JOURNAL_NAME

    @property
    def control(self) -> Path:
        return self.claude_dir / CONTROL_NAME

    @property
    def lock(self) -> Path:
        return self.claude_dir / LOCK_NAME

    @property
    def archive_dir(self) -> Path:
        return self.claude_dir / "loops"

    @property
    def private_dir(self) -> Path:
        """loopdeck's caches and iteration logs, which nobody needs to read by hand."""
        return self.claude_dir / "loopdeck"

    @property
    def ralph_state(self) -> Path:
        return self.claude_dir / RALPH_NAME

    def iteration_logs(self, started_at: str, loop_id: str = "") -> Path:
        """The folder of one loop's iteration logs (`NNNN.log`): each loop its own, named as its
        archive folder, so a new loop's `0001.log` is never an older loop's (and goes to its
        archive with it)."""
        return Path(self.iteration_logs_folder(started_at, loop_id))

    def iteration_logs_folder(self, started_at: str, loop_id: str = "") -> str:
        """`iteration_logs`, as a string, for a reader that looks on every snapshot: a `Path`
        made of the loop's name interned that name anew each time."""
        return os.path.join(self.private_dir, "iterations", loop_folder_name(started_at, loop_id))


def loop_folder_name(started_at: str, loop_id: str = "") -> str:
    """A loop's name as a folder (its archive, its iteration logs): when it started, in the
    characters a file name may hold, then its id (`2026-01-09T10-30-00+00-00-1f2e3d4c5b6a`):
    two loops started in the same second get two folders. A loop without an id (its state
    written before loops had one) keeps the name it always had."""
    name = re.sub(r"[^0-9A-Za-z.+-]", "-", started_at or "unknown").strip("-") or "unknown"
    ident = re.sub(r"[^0-9A-Za-z]", "", loop_id)[:64]
    return f"{name}-{ident}" if ident else name


def find_workspace(start: Path | None = None) -> Workspace:
    """The nearest folder at or above `start` that holds a loop, else `start` itself.

    People run `loopdeck status` from a subfolder of their project; walking up finds the loop
    the way git finds `.git`.
    """
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".claude" / STATE_NAME).exists():
            return Workspace(folder)
    return Workspace(here)

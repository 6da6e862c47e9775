"""Many workspaces at once: find the loops below a folder, and one row per loop for a fleet view.

People leave several loops running overnight, in several checkouts. The fleet view answers one
question first: which of them needs a person? Rows are read with the same code as `status`
(`loop.views.snapshot` for loopdeck's loops, `loop.formats` for the neighbours), and a cheap `stamp`
of each folder (a few `stat` calls) tells a viewer which folders to read again.
"""

from __future__ import annotations

import os
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop import formats
from loop.repo.gitargv import git_argv
from loop.store.paths import STATE_NAME, Workspace

SKIP = frozenset({".git", "node_modules", ".venv", "venv", ".venv-ci", "__pycache__", ".tox", ".claude"})
"""Folders never worth walking into: they hold no workspace of their own (and are huge)."""
MAX_DEPTH = 4
MAX_FOLDERS = 20_000
"""A scan stops after looking at this many folders: a home directory is not a workspace."""


def has_loop(folder: Path) -> bool:
    return (folder / ".claude" / STATE_NAME).is_file() or bool(formats.candidates(folder))


def scan(root: Path, depth: int = MAX_DEPTH) -> list[Path]:
    """The folders at or below `root` (at most `depth` levels down) that hold a loop.

    What git ignores is skipped (build output, vendored trees), and so are `.git`,
    `node_modules` and virtual environments; archived loops (`.claude/loops/`) are not loops.
    """
    root = root.resolve()
    ignored: dict[Path, frozenset[str]] = {}  # per scan: an edited .gitignore counts at the next one
    found: list[Path] = []
    queue: deque[tuple[Path, int]] = deque([(root, 0)])
    seen = 0
    while queue and seen < MAX_FOLDERS:
        folder, level = queue.popleft()
        seen += 1
        if has_loop(folder):
            found.append(folder)
        if level >= depth:
            continue
        try:
            children = sorted(
                entry.name
                for entry in os.scandir(folder)
                if entry.is_dir(follow_symlinks=False) and entry.name not in SKIP
            )
        except OSError:
            continue
        skip = _ignored(folder, children, ignored)
        for name in children:
            if name not in skip:
                queue.append((folder / name, level + 1))
    return sorted(found)


def _ignored(folder: Path, names: list[str], cache: dict[Path, frozenset[str]]) -> frozenset[str]:
    """The names among `names` that git ignores in `folder` (none outside a git work tree)."""
    if folder in cache:
        return cache[folder]
    result: frozenset[str] = frozenset()
    if names and _in_git(folder):
        try:
            ran = subprocess.run(
                git_argv("-C", str(folder), "check-ignore", "-z", "--stdin"),
                input="\0".join(f"{name}/" for name in names).encode(),
                capture_output=True,
                timeout=10,
                check=False,
            )
            if ran.returncode == 0:
                result = frozenset(
                    p.rstrip("/") for p in ran.stdout.decode(errors="replace").split("\0") if p
                )
        except (OSError, subprocess.SubprocessError):
            pass
    cache[folder] = result
    return result


def _in_git(folder: Path) -> bool:
    return any((parent / ".git").exists() for parent in (folder, *folder.parents))


@dataclass(frozen=True)
class FleetRow:
    """One loop of the fleet, as much as its files tell."""

    folder: str
    kind: str
    status: str
    iteration: int | None = None
    max_iterations: int | None = None
    pending: int | None = None
    waiting_for: str | None = None
    last_event: str | None = None
    """ISO time of the latest thing that happened (journal event, or the file's own time)."""
    cost_usd: float | None = None
    problem: str | None = None
    needs_person: bool = False
    read_only: bool = False
    trend: tuple[float, ...] = ()
    """The loop's recent iterations, oldest first: its tests failing, or its tasks open when no
    test was counted (`trend_of` says which); the fleet draws it as a sparkline."""
    trend_of: str = ""
    """"failing" or "open" ("" with no trend)."""

    @property
    def rank(self) -> int:
        """0: needs a person; 1: working; 2: finished or stopped."""
        if self.needs_person:
            return 0
        return 1 if self.status in ("running", "initializing", "stopping") else 2

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def sort_rows(rows: list[FleetRow]) -> list[FleetRow]:
    return sorted(rows, key=lambda r: (r.rank, r.folder, r.kind))


def read_rows(folder: Path) -> list[FleetRow]:
    """Every loop in one workspace folder, loopdeck's own first. Never raises."""
    from loop.views.snapshot import read

    rows: list[FleetRow] = []
    ws = Workspace(folder)
    if ws.state.exists():
        snap = read(ws)
        if snap.error is not None:
            rows.append(
                FleetRow(str(folder), formats.OURS, "corrupt", problem=snap.error.message, needs_person=True)
            )
        elif snap.loop is not None:
            loop = snap.loop
            waiting = None
            if loop.waiting_for:
                waiting = str(loop.waiting_for.get("kind") or "a person")
            elif snap.escalation is not None or loop.escalated:
                waiting = "escalation"
            elif snap.question is not None:
                waiting = "question"
            rows.append(
                FleetRow(
                    str(folder),
                    formats.OURS,
                    loop.status,
                    loop.iteration,
                    loop.max_iterations or None,
                    snap.sources.pending_total if snap.sources else None,
                    waiting,
                    snap.events[-1].ts if snap.events else loop.started_at,
                    _cost(snap.events),
                    needs_person=waiting is not None or loop.status in ("paused", "failed"),
                    **_trend(snap.events),
                )
            )
    for item in formats.detect(folder):
        rows.append(_neighbour_row(folder, item))
    return rows


def _neighbour_row(folder: Path, item: formats.Found) -> FleetRow:
    changed = _mtime_iso(item.path)
    if item.loop is None:
        problem = str(item.problem) if item.problem else "unreadable"
        return FleetRow(
            str(folder), item.kind, "unreadable", problem=problem, last_event=changed, read_only=True
        )
    view = item.loop
    return FleetRow(
        str(folder),
        item.kind,
        view.status,
        view.iteration,
        view.max_iterations,
        view.tasks_pending,
        "a person" if view.needs_person else None,
        view.updated_at or changed,
        needs_person=view.needs_person,
        read_only=True,
    )


def _mtime_iso(path: Path) -> str | None:
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()
    except OSError:
        return None


TREND_POINTS = 30
"""The iterations a fleet row's trend keeps (the most recent): a sparkline a few cells wide."""


def _trend(events: tuple[Any, ...]) -> dict[str, Any]:
    """The row's `trend` and `trend_of` from the journal's recent events (`loop.views.progress`)."""
    from loop.views.progress import series

    found = series(events)
    for column, word in (("tests_failed", "failing"), ("tasks_open", "open")):
        values = tuple(float(v) for v in found.column(column) if v is not None)
        if values:
            return {"trend": values[-TREND_POINTS:], "trend_of": word}
    return {}


def _cost(events: tuple[Any, ...]) -> float | None:
    """What the agent runs cost, when the agent reported it (Claude Code's JSON output does)."""
    from loop.views.progress import TURNS

    total, known = 0.0, False
    for event in events:
        if event.kind not in TURNS:
            continue
        for key in ("cost_usd", "total_cost_usd"):
            value = event.data.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                total += float(value)
                known = True
                break
    return round(total, 2) if known else None


KEEP_STAMP_PATHS = 4096
"""Folders whose loop files' paths are kept worked out (`_stamp_paths`); more start afresh."""
_stamp_paths_of: dict[Path, tuple[tuple[str, tuple[str, ...]], ...]] = {}


def _stamp_paths(folder: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The loop files a `stamp` looks at, as strings, grouped by the folder holding them:
    worked out once per workspace (a fleet stamps every one of them every second, and building
    the paths cost more than looking at them)."""
    known = _stamp_paths_of.get(folder)
    if known is None:
        ws = Workspace(folder)
        groups: dict[str, list[str]] = {}
        for path in (ws.state, ws.journal, *(folder / rel for rel, _ in formats.FORMATS.values())):
            groups.setdefault(str(path.parent), []).append(str(path))
        known = tuple((parent, tuple(files)) for parent, files in groups.items())
        if len(_stamp_paths_of) >= KEEP_STAMP_PATHS:
            _stamp_paths_of.clear()
        _stamp_paths_of[folder] = known
    return known


def stamp(folder: Path) -> tuple[float, ...]:
    """A cheap fingerprint of a workspace's loop files: read the folder again when it changes.
    A folder that is not there (`docs/` in most workspaces) is one look for all its files."""
    result: list[float] = []
    for parent, files in _stamp_paths(folder):
        if parent != str(folder) and not os.path.isdir(parent):
            result.extend((0.0, -1.0) * len(files))
            continue
        for path in files:
            try:
                st = os.stat(path)
                result.extend((st.st_mtime, float(st.st_size)))
            except OSError:
                result.extend((0.0, -1.0))
    return tuple(result)

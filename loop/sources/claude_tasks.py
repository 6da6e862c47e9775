"""Source 1: Claude Code Tasks, one JSON file a task in `~/.claude/tasks/<list>/`.

The list is `CLAUDE_CODE_TASK_LIST_ID` when set (a list shared across sessions), else the
session's own, named by the full session id in older versions and `session-` + its first eight
characters in newer ones. The file layout is not documented (reference/claude-code.md), so the
reader accepts what it can and passes over the rest: other files, missing keys, a task caught
mid-write. `blockedBy`, `owner` and `metadata.target_files` are kept for the parallel scheduler.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from loop.sources.base import MAX_ITEMS, SourceReport, TaskItem, unavailable
from loop.store.safeopen import read_regular

NAME = "claude_tasks"
MAX_TASK_BYTES = 4 * 1024 * 1024
_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "done"}


def claude_home() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def list_candidates(session_id: str | None) -> list[str]:
    shared = os.environ.get("CLAUDE_CODE_TASK_LIST_ID")
    if shared:
        return [shared]
    if not session_id:
        return []
    return [session_id, f"session-{session_id[:8]}"]


def _strs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in value if isinstance(v, str | int) and not isinstance(v, bool))


def _sort_key(item: TaskItem) -> tuple[int, int, str]:
    ident = item.id or ""
    return (0, int(ident), "") if ident.isdigit() else (1, 0, ident)


def read_list(folder: Path, now: str) -> SourceReport:
    counts = {"pending": 0, "in_progress": 0, "done": 0}
    items: list[TaskItem] = []
    warnings: list[str] = []
    try:
        entries = sorted(folder.iterdir())
    except NotADirectoryError:
        return unavailable(NAME, f"{folder}: not a folder", now, detail=str(folder), path=str(folder))
    except OSError as exc:
        return unavailable(
            NAME, f"{folder}: cannot be listed ({exc.strerror})", now, detail=str(folder), path=str(folder)
        )
    for path in entries:
        if path.suffix != ".json" or path.name.startswith("."):
            continue
        try:
            if path.stat().st_size > MAX_TASK_BYTES:
                warnings.append(f"{path.name}: too large for a task, passed over")
                continue
            task = json.loads(read_regular(path, MAX_TASK_BYTES + 1))
        except FileNotFoundError:
            continue  # deleted while we listed: that is what "deleted" looks like
        except (OSError, ValueError) as exc:
            warnings.append(f"{path.name}: not a JSON task ({type(exc).__name__}), passed over")
            continue
        if not isinstance(task, dict):
            warnings.append(f"{path.name}: not a JSON object, passed over")
            continue
        raw_status = task.get("status")
        if raw_status == "deleted":
            continue
        status = _STATUS.get(raw_status, str(raw_status)) if isinstance(raw_status, str) else "pending"
        if status in counts:
            counts[status] += 1
        metadata = task.get("metadata")
        if not isinstance(metadata, dict):
            metadata = {}
        owner = task.get("owner")
        items.append(
            TaskItem(
                title=str(task.get("subject") or task.get("description") or path.stem),
                status=status,
                id=str(task.get("id", path.stem)),
                blocked_by=_strs(task.get("blockedBy")),
                owner=str(owner) if isinstance(owner, str) and owner else None,
                target_files=_strs(metadata.get("target_files")),
            )
        )
    items.sort(key=_sort_key)
    return SourceReport(
        NAME,
        enabled=True,
        available=True,
        items=tuple(items[:MAX_ITEMS]),
        checked_at=now,
        detail=str(folder),
        path=str(folder),
        warnings=tuple(warnings),
        pending=counts["pending"],
        in_progress=counts["in_progress"],
        done=counts["done"],
    )


def check(tasks_root: Path | None, session_id: str | None, now: str) -> SourceReport:
    root = tasks_root if tasks_root is not None else claude_home() / "tasks"
    names = list_candidates(session_id)
    if not names:
        return SourceReport(
            NAME,
            enabled=True,
            available=True,
            checked_at=now,
            detail="no task list known yet (no session, no CLAUDE_CODE_TASK_LIST_ID)",
        )
    for name in names:
        folder = root / name
        if folder.is_dir():
            return read_list(folder, now)
    # Newer models may not use Tasks at all: no list is "nothing pending", not an error.
    return SourceReport(
        NAME,
        enabled=True,
        available=True,
        checked_at=now,
        detail=f"no task list {' or '.join(names)} under {root}",
    )

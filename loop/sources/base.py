"""The report every task source returns, and the item it lists."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MAX_ITEMS = 200
"""Reports list this many items at most: enough to name what is pending, small enough to keep
`status --json` and the hook's prompt short."""

SOURCE_NAMES = ("github", "claude_tasks", "task_file", "todos")
"""Seed 000 §3.2's priority: team items first, then Claude Tasks, the checklist, the TODO list."""


@dataclass(frozen=True)
class TaskItem:
    title: str
    status: str
    """pending | in_progress | done | skipped, or the source's own word for anything else."""
    id: str | None = None
    line: int | None = None
    blocked_by: tuple[str, ...] = ()
    owner: str | None = None
    target_files: tuple[str, ...] = ()
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"title": self.title, "status": self.status}
        for key in ("id", "line", "owner", "url"):
            value = getattr(self, key)
            if value is not None:
                obj[key] = value
        if self.blocked_by:
            obj["blocked_by"] = list(self.blocked_by)
        if self.target_files:
            obj["target_files"] = list(self.target_files)
        return obj


@dataclass(frozen=True)
class SourceReport:
    name: str
    enabled: bool
    available: bool
    pending: int = 0
    in_progress: int = 0
    done: int = 0
    items: tuple[TaskItem, ...] = ()
    error: str | None = None
    """Why the source is unavailable (or disabled): shown to people as it is."""
    checked_at: str = ""
    skipped: int = 0
    detail: str | None = None
    """Where the answer came from (file, list, project), for people."""
    warnings: tuple[str, ...] = field(default=())
    """Parts of the source that were passed over (a corrupt task file, a bad line)."""
    path: str | None = None
    """The file or folder the answer is read from, when there is one (a task file, a transcript,
    a task list folder): what a viewer watches. Data, set by the source: `detail` is prose for
    people and is never parsed back into a path."""

    @property
    def open_count(self) -> int:
        return self.pending + self.in_progress

    @property
    def uncertain(self) -> bool:
        return self.enabled and not self.available

    def pending_items(self) -> list[TaskItem]:
        return [i for i in self.items if i.status in ("pending", "in_progress")]

    def to_json(self) -> dict[str, Any]:
        obj = asdict(self)
        obj["items"] = [item.to_json() for item in self.items]
        obj["warnings"] = list(self.warnings)
        return obj


def disabled(name: str, reason: str, now: str) -> SourceReport:
    return SourceReport(name, enabled=False, available=False, error=reason, checked_at=now)


def unavailable(
    name: str, reason: str, now: str, detail: str | None = None, path: str | None = None
) -> SourceReport:
    return SourceReport(
        name, enabled=True, available=False, error=reason, checked_at=now, detail=detail, path=path
    )

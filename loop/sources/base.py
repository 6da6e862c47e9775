"""The report every task source returns, and the item it lists."""

from __future__ import annotations

from loop.core.model import MAX_ITEMS, SOURCE_NAMES, SourceReport, TaskItem

__all__ = ["MAX_ITEMS", "SOURCE_NAMES", "SourceReport", "TaskItem", "disabled", "unavailable"]


def disabled(name: str, reason: str, now: str) -> SourceReport:
    return SourceReport(name, enabled=False, available=False, error=reason, checked_at=now)


def unavailable(
    name: str, reason: str, now: str, detail: str | None = None, path: str | None = None
) -> SourceReport:
    return SourceReport(
        name, enabled=True, available=False, error=reason, checked_at=now, detail=detail, path=path
    )

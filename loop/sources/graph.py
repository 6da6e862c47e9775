"""A parallel loop's task graph as a task source: what `status`, the summaries and the monitor
count for a loop of workers.

The graph (a Claude Code Tasks list folder, or a JSON or YAML file of the same fields, see
`loop.sources.taskgraph`) is the loop's work: its tasks are pending, in progress or completed, and a loop
of workers ends when every one is completed. Counted like the other sources, the tasks show up
where a person looks (the top panel, the progress bar, `status`, the ending's "done" and
"remaining" by name) instead of a zero made up for a loop that has no task file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from loop.core.errors import LoopdeckError
from loop.sources.base import MAX_ITEMS, SourceReport, TaskItem, unavailable

if TYPE_CHECKING:  # the scheduler costs ~9 ms to import: only loops of workers load it
    from loop.core.scheduler import Task

NAME = "graph"
_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "done"}


def check(path: Path, now: str) -> SourceReport:
    # Here, not at the top: the scheduler it loads costs ~9 ms (`-X importtime`), and the Stop
    # hook loads this module for every loop, a loop of workers or not.
    from loop.sources import taskgraph as graph

    try:
        tasks = graph.read(path)
    except (LoopdeckError, OSError) as exc:
        return unavailable(NAME, str(exc), now, detail=str(path), path=str(path))
    return of_tasks(tasks, now, str(path), path=str(path))


def of_tasks(tasks: Iterable[Task], now: str, detail: str, path: str | None = None) -> SourceReport:
    """The tasks counted as a source (what a loop of workers on a server counts too)."""
    counts = {"pending": 0, "in_progress": 0, "done": 0, "skipped": 0}
    items: list[TaskItem] = []
    for task in tasks:
        status = _STATUS.get(task.status, "pending")
        if status == "done" and task.skipped:  # a person skipped it: finished, not done
            status = "skipped"
        counts[status] += 1
        if len(items) < MAX_ITEMS:
            items.append(
                TaskItem(
                    title=task.subject,
                    status=status,
                    id=task.id,
                    owner=task.owner,
                    blocked_by=task.blocked_by,
                    target_files=task.target_files,
                )
            )
    return SourceReport(
        NAME,
        enabled=True,
        available=True,
        pending=counts["pending"],
        in_progress=counts["in_progress"],
        done=counts["done"],
        skipped=counts["skipped"],
        items=tuple(items),
        checked_at=now,
        detail=detail,
        path=path,
    )

"""A workflow orchestrator's `.claude/workflow-loop-state.json`.

The tool documents its states (initializing, running, completed, stopped, failed) and a task
queue, not a fixed schema, so the common spellings are read: `iteration` or
`current_iteration`, `max_iterations`, `tasks` (each with `title` and `status`), `current_task`,
`started_at`.
"""

from __future__ import annotations

from pathlib import Path

from loop.core.errors import FileProblem
from loop.formats.common import JsonFields
from loop.formats.view import NeighbourLoop, normalise

KIND = "workflow-loop"
PATH = ".claude/workflow-loop-state.json"
STATUSES = ("initializing", "running", "paused", "completed", "stopped", "failed")
DONE = ("completed", "complete", "done", "passed", "skipped")


def read(path: Path) -> NeighbourLoop:
    f = JsonFields.load(path)
    status = f.status(STATUSES, "status", "state")
    done, pending = 0, []
    for index, task in enumerate(f.array("tasks", "queue", "task_queue")):
        if not isinstance(task, dict):
            raise FileProblem(path, f'"tasks"[{index}] should be an object with a status', f.line_of("tasks"))
        task_status = str(task.get("status", "pending"))
        if task_status in DONE:
            done += 1
        else:
            pending.append(str(task.get("title") or task.get("id") or "?"))
    has_tasks = f.get("tasks", "queue", "task_queue")[1] is not None
    return NeighbourLoop(
        kind=KIND,
        state_file=str(path),
        status=normalise(status),
        iteration=f.integer("iteration", "current_iteration", "currentIteration"),
        max_iterations=f.integer("max_iterations", "maxIterations"),
        started_at=f.string("started_at", "startedAt"),
        updated_at=f.string("updated_at", "updatedAt", "last_updated"),
        current_task=f.string("current_task", "currentTask"),
        tasks_done=done if has_tasks else None,
        tasks_pending=len(pending) if has_tasks else None,
        pending_titles=tuple(pending[:20]),
    )

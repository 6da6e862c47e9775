"""A task loop's `docs/.task-loop-state.json`: one task per iteration within a scope.

`status`, `startedAt`, `lastUpdated`, `maxIterations`, `currentIteration`, `currentTask` (an id),
`scope`, `completedTasks[]`, `failedTasks[]`. The file lists what is done, not what is left, so
the view has no pending count.
"""

from __future__ import annotations

from pathlib import Path

from loop.formats.common import JsonFields
from loop.formats.view import NeighbourLoop, normalise

KIND = "task-loop"
PATH = "docs/.task-loop-state.json"
STATUSES = ("running", "paused", "stopping", "complete", "failed")


def read(path: Path) -> NeighbourLoop:
    f = JsonFields.load(path)
    status = f.status(STATUSES)
    done = f.items("completedTasks")
    f.items("failedTasks")
    f.mapping("scope")
    return NeighbourLoop(
        kind=KIND,
        state_file=str(path),
        status=normalise(status),
        iteration=f.integer("currentIteration", required=True),
        max_iterations=f.integer("maxIterations") or None,
        started_at=f.string("startedAt"),
        updated_at=f.string("lastUpdated"),
        current_task=f.string("currentTask") or None,
        tasks_done=len(done),
    )

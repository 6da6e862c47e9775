"""A continuous-session loop's `docs/.continuous-session-state.json`: one fresh agent session
per queue item.

`status`, `startedAt`, `lastUpdated`, `maxSessions`, `currentSession`, `completedItems[]`,
`failedItems[]` and `queueSnapshot[]` (the items left when the state was saved).
"""

from __future__ import annotations

from pathlib import Path

from loop.formats.common import JsonFields
from loop.formats.view import NeighbourLoop, normalise

KIND = "continuous-session"
PATH = "docs/.continuous-session-state.json"
STATUSES = ("running", "paused", "stopping", "complete", "failed")


def read(path: Path) -> NeighbourLoop:
    f = JsonFields.load(path)
    status = f.status(STATUSES)
    queue = f.items("queueSnapshot")
    done = f.items("completedItems")
    f.items("failedItems")  # checked for shape: a person reads it in the file
    return NeighbourLoop(
        kind=KIND,
        state_file=str(path),
        status=normalise(status),
        iteration=f.integer("currentSession", required=True),
        max_iterations=f.integer("maxSessions") or None,
        started_at=f.string("startedAt"),
        updated_at=f.string("lastUpdated"),
        current_task=queue[0] if queue and status == "running" else None,
        tasks_done=len(done),
        tasks_pending=len(queue),
        pending_titles=tuple(queue[:20]),
    )

"""A loop-orchestrator agent's `.claude-task-state.json` at the workspace root.

`designFile`, `currentIteration`, `maxIterations`, `completionPromise`, `status`, `validation`
and the prompt it re-injects (`prompt`). The agent deletes the file when the work is complete.
"""

from __future__ import annotations

from pathlib import Path

from loop.formats.common import JsonFields
from loop.formats.view import NeighbourLoop, normalise

KIND = "claude-task-state"
PATH = ".claude-task-state.json"
STATUSES = ("initializing", "running", "validating", "paused", "complete", "completed", "stopped", "failed")


def read(path: Path) -> NeighbourLoop:
    f = JsonFields.load(path)
    status = f.status(STATUSES)
    f.mapping("validation")
    design = f.string("designFile")
    return NeighbourLoop(
        kind=KIND,
        state_file=str(path),
        status=normalise("running" if status == "validating" else status),
        iteration=f.integer("currentIteration", required=True),
        max_iterations=f.integer("maxIterations") or None,
        prompt=f.string("prompt") or (f"the design in {design}" if design else ""),
        completion_promise=f.string("completionPromise"),
        started_at=f.string("startedAt", "started_at"),
        current_task=design,
    )

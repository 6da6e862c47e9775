"""Undoing a landed task, as a rule: the task is open again (pending, nobody's) in the graph
and no longer among what the loop completed, so the next run of workers takes it and lands it
again. The revert commit itself is the driver's (`loop.repo.landing.revert`); this says what it
means for the loop."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loop.core.board import PENDING, Step, Update


def undone(step: Step, task: str, data: dict[str, Any]) -> Step:
    """`task` was reverted on the loop's branch (`data`: the revert, the commits it took
    back): out of the board's done tasks, pending in the graph, journaled."""
    board = step.board
    step.board = replace(
        board,
        done=tuple(t for t in board.done if t != task),
        skipped=tuple(t for t in board.skipped if t != task),
    )
    step.updates.append(Update(task, PENDING, None))
    step.events.append(("task-undone", {"task": task, **data}))
    return step

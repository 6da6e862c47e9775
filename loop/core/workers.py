"""The loop's transitions for a loop of parallel workers.

The parallel drivers (workers on this machine, or a Temporal workflow) keep many agents busy at
once. Which task a worker takes, who holds which file, when a task is redone or its worker
replaced: the scheduler's rules (`loop.core.scheduler`). Everything about the loop itself is
decided here, as for the other drivers: how many turns may start (an iteration is a worker
turn), what a turn's facts mean for the loop (cost, usage limits, refused tools, the same error
repeating), escalations and the ending.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from loop.core import progress
from loop.core.model import Aggregate, LoopState, Result, Turn
from loop.core.transitions import (
    add_usage,
    budget_wait,
    complete,
    lift_limit,
    limit_holds,
    limit_wait,
    over_budget,
    same_error,
    same_error_reason,
    stuck_wait,
    wait,
)


def admit(state: LoopState, wanted: int, now: datetime) -> tuple[int, Result]:
    """How many of `wanted` worker turns may start now; those started count as iterations.

    None while the loop is not running or waits for a usage limit to reset (lifted once it has),
    none once the cost budget is spent (escalation, as the runner's); up to `max_iterations`,
    past which the loop escalates with work left: running workers finish their turns, no new
    one starts until a person raises the limit or resumes."""
    state = state.copy()
    result = Result("allow", state)
    if wanted <= 0 or state.status != "running":
        return 0, result
    if state.waiting_kind == "usage-limit":
        if limit_holds(state, now):
            return 0, result
        lift_limit(state, result)
    spent = over_budget(state)
    if spent is not None:
        budget_wait(state, result, now, spent)
        return 0, result
    room = wanted
    if state.max_iterations > 0:
        room = min(wanted, max(0, state.max_iterations - state.iteration))
        if room == 0:
            if not state.escalated:
                state.escalated = True
                reason = f"{state.max_iterations} iterations (worker turns) reached with tasks left"
                result.events.append(
                    (
                        "escalation",
                        {"reason": reason, "kind": "max-iterations", "max_iterations": state.max_iterations},
                    )
                )
                wait(state, result, now, "escalation", reason, escalation="max-iterations")
            return 0, result
    state.iteration += room
    return room, result


TURN_VERDICTS = ("approve", "rework", "retry", "hold")
"""What a worker's turn comes to for the loop: its work may be judged (audit, merge); it goes
again with feedback (failed, or changed nothing); it runs again as it was once the loop may
start turns (a usage limit: after the reset, no turn spent); it waits for a person (a refused
tool, a question, the loop escalated)."""


def worker_turn(
    state: LoopState,
    turn: Turn,
    *,
    worker: str,
    task: str,
    changed: bool,
    asked: str | None,
    now: datetime,
) -> tuple[str, Result]:
    """A worker's turn ended: the same judgement as the runner's turn. Its cost counts against
    the budget; a usage limit makes every worker wait for the reset, and the limited turn is not
    an iteration spent; refused tools escalate, naming them; the same error repeated escalates;
    a question is journaled (that worker waits, the others go on); a turn that failed or changed
    nothing is never approved."""
    state = state.copy()
    result = Result("allow", state)
    events = result.events
    add_usage(state, turn)
    if turn.limited is not None:
        state.iteration = max(0, state.iteration - 1)  # not a turn spent: it runs again after the reset
        limit_wait(result, state, turn, now)
        return "retry", result
    if turn.limited is None and turn.failure is None:
        state.stuck.pop("limit_waits", None)
    if asked is not None:
        events.append(("question", {"question": asked, "worker": worker, "task": task}))
        return "hold", result
    if turn.denied:
        tools = ", ".join(turn.denied)
        events.append(("permission-denied", {"tools": list(turn.denied), "worker": worker, "task": task}))
        reason = f"{worker} (task {task}) was not allowed to use {tools}" + (
            f"; {turn.denied_hint}" if turn.denied_hint else ""
        )
        events.append(("escalation", {"kind": "permission-denied", "reason": reason, "worker": worker}))
        wait(state, result, now, "escalation", reason, escalation="permission-denied")
        return "hold", result
    if turn.failure is not None:
        if same_error(state, turn.error or turn.failure):
            reason = f"{same_error_reason(state)} (workers' turns, last: {worker} on task {task})"
            return "hold", stuck_wait(result, state, now, reason)
        return "rework", result
    state.stuck.pop("error", None)
    state.stuck.pop("errors", None)
    verdict = "approve" if changed else "rework"
    spent = over_budget(state)
    if spent is not None:
        budget_wait(state, result, now, spent)
    return verdict, result


def checked(
    state: LoopState, validation: Mapping[str, Any], done: int, files: Mapping[str, Any] | None = None
) -> Result:
    """The checks ran on the loop's work (a merged tree, or a task checked in place): the
    progress the turn's work made is judged on them, as the runner's turn is (`progress`
    journaled, `last_validation` recorded). `done`: the tasks the loop completed so far."""
    state = state.copy()
    result = Result("allow", state)
    moved = progress.test_moves(state.last_validation, validation)
    state.last_validation = progress.record(validation, state.last_validation)
    data = progress.event(None, validation, files, moved)
    data["tasks"] = {"done": done}
    result.events.append(("progress", data))
    return result


def escalate(state: LoopState, kind: str, reason: str, now: datetime, **data: Any) -> Result:
    """The loop needs a person (a deadlock of the task graph, a task no worker could move, a
    merge that keeps conflicting): it waits, saying why."""
    state = state.copy()
    result = Result("allow", state)
    if state.status != "running":
        return result
    result.events.append(("escalation", {"kind": kind, "reason": reason, **data}))
    wait(state, result, now, "escalation", reason, escalation=kind)
    return result


def finish(state: LoopState, reason: str, sources: Aggregate | None, now: datetime) -> Result:
    """Every task of the graph is done (merged into the loop's branch): the loop completes and
    is archived with the summary every driver's ending has."""
    state = state.copy()
    return complete(Result("allow", state), state, now, reason, sources)

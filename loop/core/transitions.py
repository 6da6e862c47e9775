"""The moves every event of the loop shares: wait for a person, escalate as stuck, wait out a
usage limit, complete with a summary, and the counts the next decision is judged against.

Pure, like the rest of the engine: each takes the state (a copy the caller owns) and the
Result being built, and changes both.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from loop.core.model import Aggregate, LoopState, Result, SourceReport, Turn, combine, replace
from loop.core.prompts import vanished_reason
from loop.core.redact import redact
from loop.core.timeutil import iso_s, parse_iso

UNCONFIRMED_ESCALATION = "unconfirmed"
"""The escalation's kind when a running loop names what nobody here confirmed."""


def hold_unconfirmed(state: LoopState, listed: Sequence[str], now: datetime) -> Result:
    """A running loop whose file changed under its driver names values nobody on this machine
    confirmed: nothing more runs until a person confirms what it names now. The one rule for
    every driver that runs a loop outside a session (a loop that is not running is left as it
    is: the Result's state is None)."""
    if not listed or state.status != "running":
        return Result("allow", None)
    state = state.copy()
    result = Result("allow", state)
    escalate_unconfirmed(state, result, listed, now)
    return result


def escalate_unconfirmed(state: LoopState, result: Result, listed: Sequence[str], now: datetime) -> None:
    """`hold_unconfirmed` on a state the caller already copied (the Stop's own)."""
    reason = f"the loop names things nobody on this machine confirmed: {unconfirmed_line(listed)}"
    escalation(state, result, now, UNCONFIRMED_ESCALATION, reason)


def over_budget(state: LoopState) -> str | None:
    """Why no new turn may start for the cost spent (the budget reached), or None."""
    budget = state.limits.get("max_cost_micro_usd")
    spent = state.usage.get("cost_micro_usd", 0)
    if not budget or spent < budget:
        return None
    return f"cost ${spent / 1e6:.2f} reached the budget of ${budget / 1e6:.2f}"


def budget_wait(state: LoopState, result: Result, now: datetime, reason: str) -> Result:
    """The budget is spent: the loop waits until a person raises it."""
    return escalation(state, result, now, "max-cost", reason)


UNCONFIRMED_SHOWN = 4
"""How many unconfirmed values a one-line message names before it says how many more."""


def unconfirmed_line(listed: Sequence[str]) -> str:
    """The unconfirmed values, shortened for one line."""
    shown = "; ".join(item[:120] for item in listed[:UNCONFIRMED_SHOWN])
    more = len(listed) - UNCONFIRMED_SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")


def ending_summary(
    outcome: str, reason: str, state: LoopState, aggregate: Aggregate | None, now: datetime
) -> dict[str, Any]:
    """What every ending records: how, why, iterations, duration, cost, and the tasks done,
    skipped and remaining by name, counted from the sources at the end (None when they could
    not be counted: never a guessed zero)."""
    started = parse_iso(state.started_at)
    summary: dict[str, Any] = {
        "outcome": outcome,
        "reason": reason,
        "ended_at": iso_s(now),
        "iterations": state.iteration,
        "duration_s": round((now - started).total_seconds(), 1) if started else None,
        "pending_at_end": aggregate.pending_total if aggregate and not aggregate.uncertain else None,
        "sources": [_brief(r) for r in aggregate.sources] if aggregate else [],
        "tasks": _task_names(aggregate),
        "usage": dict(state.usage),
    }
    if state.last_validation:
        summary["validation"] = dict(state.last_validation)
    return summary


def _task_names(aggregate: Aggregate | None) -> dict[str, list[str]] | None:
    if aggregate is None:
        return None
    names: dict[str, list[str]] = {"done": [], "skipped": [], "remaining": []}
    for report in aggregate.sources:
        if not (report.enabled and report.available):
            continue
        for item in report.items:
            if item.status == "done":
                names["done"].append(item.title)
            elif item.status == "skipped":
                names["skipped"].append(item.title)
            elif item.status in ("pending", "in_progress"):
                names["remaining"].append(item.title)
    return names


def escalation(
    state: LoopState, result: Result, now: datetime, kind: str, reason: str, **data: Any
) -> Result:
    """The loop needs a person: journal the escalation (its kind, why, and `data`), and wait."""
    result.events.append(("escalation", {"kind": kind, "reason": reason, **data}))
    wait(state, result, now, "escalation", reason, escalation=kind)
    return result


def wait(state: LoopState, result: Result, now: datetime, kind: str, reason: str, **more: Any) -> None:
    """Pause the loop until a person answers, saying why in the state."""
    state.status = "paused"
    state.waiting_for = {"kind": kind, "reason": reason, "since": iso_s(now), **more}
    result.events.append(("paused", {"reason": reason, "waiting_for": kind}))
    result.action = "allow"
    result.reason = None
    result.system_message = f"loopdeck: loop paused, waiting for a person ({reason})"


def stuck_wait(result: Result, state: LoopState, now: datetime, reason: str, kind: str = "stuck") -> Result:
    """The loop is going nowhere: say why and wait for a person (counters start over)."""
    result.events.append(("escalation", {"kind": kind, "reason": reason}))
    wait(state, result, now, "escalation", reason, escalation=kind)
    state.stuck = {k: v for k, v in state.stuck.items() if k in ("tasks", "mode")}
    return result


def same_error(state: LoopState, error: str | None) -> bool:
    """Count `error` against the previous turn's; True when it has now repeated enough. The
    signature is compared redacted, as the state keeps it (a turn read back from the file must
    match the same error seen afresh)."""
    if not error:
        return False
    signature = redact(error[-400:])
    stuck = state.stuck
    stuck["errors"] = stuck.get("errors", 0) + 1 if stuck.get("error") == signature else 1
    stuck["error"] = signature
    return bool(stuck["errors"] >= state.limit("same_error_after"))


def same_error_reason(state: LoopState) -> str:
    return f"the same error {state.limit('same_error_after')} times in a row"


LIMIT_BACKOFF_S = (60, 300, 900, 1800, 3600)
"""How long to wait for a usage limit that did not say when it resets: longer each time."""


def limit_until(resets_at: str | None, waits: int, now: datetime) -> tuple[datetime, int]:
    """Until when a usage limit holds an agent, and how many limits in a row have now not said
    when they reset (each such wait is longer than the one before)."""
    until = parse_iso(resets_at or "")
    if until is not None and until > now:
        return until, waits
    return now + timedelta(seconds=LIMIT_BACKOFF_S[min(waits, len(LIMIT_BACKOFF_S) - 1)]), waits + 1


def agent_for_turn(held: Sequence[datetime | None], current: int, now: datetime) -> int | None:
    """Which agent takes the next turn, of the first choice and its fallbacks (in that order,
    each with the end of the limit that holds it, or None): the first choice whenever it is
    free, else the one in use while it is free, else the first free one; None when a limit
    holds every one (the loop then waits for the earliest reset)."""
    free = [i for i, until in enumerate(held) if until is None or now >= until]
    if not free:
        return None
    if 0 in free:
        return 0
    return current if current in free else free[0]


def limit_wait(result: Result, state: LoopState, turn: Turn, now: datetime) -> Result:
    """A usage or rate limit: not a failure, not stuck, no retry spent: wait until it resets."""
    waits = int(state.stuck.get("limit_waits", 0))
    until, after = limit_until(turn.resets_at, waits, now)
    if after != waits:
        state.stuck["limit_waits"] = after
    reason = turn.limited or "usage limit reached"
    state.waiting_for = {"kind": "usage-limit", "reason": reason, "since": iso_s(now), "until": iso_s(until)}
    result.events.append(("usage-limit", {"reason": reason, "until": iso_s(until)}))
    result.action = "allow"
    result.reason = None
    result.system_message = f"loopdeck: {reason}; waiting until {iso_s(until)}"
    return result


def integrity(state: LoopState, sources: Aggregate) -> str | None:
    """Why the task file cannot be trusted this Stop, or None. Records its counts (open, done,
    skipped) in the state, so the next Stop can tell where its open tasks went.

    An open task that is now neither open, done nor skipped has vanished. One may be a task the
    agent removed on purpose; most of them at once, or the file emptied, is a file cut short or
    rewritten, and "nothing pending" would complete a loop whose work was never done. So that
    escalates to a person, for every driver. The counts are recorded before the answer: when a
    person resumes the loop, the file as it is then is the baseline, and the loop goes on."""
    report = sources.by_name("task_file")
    if report is None or not report.available:
        return None
    now = {"open": report.open_count, "done": report.done, "skipped": report.skipped}
    before = state.extra.get("task_file_counts")
    state.extra.pop("task_file_boxes", None)  # the older record: the box total says too little
    state.extra["task_file_counts"] = now
    if not isinstance(before, dict):
        return None
    was = {key: before.get(key) for key in now}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in was.values()):
        return None
    open_before = int(was["open"] or 0)
    finished = max(0, now["done"] - int(was["done"] or 0)) + max(0, now["skipped"] - int(was["skipped"] or 0))
    vanished = open_before - now["open"] - finished
    if vanished <= 0:
        return None
    emptied = not any(now.values())
    if emptied or (vanished >= 2 and vanished * 2 > open_before):
        return vanished_reason(vanished, state.task_path or "the task file")
    return None


def task_mark(sources: Aggregate) -> str:
    return ";".join(f"{r.name}:{r.pending}/{r.in_progress}/{r.done}" for r in sources.sources)


def no_task_progress(state: LoopState, tasks: str) -> bool:
    """A working turn (not a review or verification turn) that left the task counts as they
    were: only the workspace can still show progress."""
    return state.stuck.get("mode", "work") == "work" and state.stuck.get("tasks") == tasks


def count_tasks(state: LoopState, tasks: str) -> None:
    """Record the task counts the next turn is judged against. A state written before the
    workspace was compared within a turn kept a combined `mark`: it goes (its turn counts as
    progress once)."""
    state.stuck["tasks"] = tasks
    state.stuck.pop("mark", None)


def leave_verification(state: LoopState, events: list[tuple[str, dict[str, Any]]], why: str) -> None:
    state.verification_mode = False
    state.verification_remaining = 0
    events.append(("verification-interrupted", {"reason": why}))


def current_task(sources: Aggregate) -> str | None:
    for report in sources.with_pending:
        items = report.pending_items()
        in_progress = [i for i in items if i.status == "in_progress"]
        chosen = in_progress or items
        if chosen:
            return chosen[0].title
    return None


def complete(
    result: Result,
    state: LoopState,
    now: datetime,
    reason: str,
    aggregate: Aggregate | None,
    note: str | None = None,
) -> Result:
    state.status = "completed"
    state.verification_mode = False
    state.waiting_for = None
    summary = ending_summary("completed", reason, state, aggregate, now)
    if note:
        summary["note"] = note
    result.effects = replace(result.effects, archive=summary)
    result.events.append(("completed", {"reason": reason, "iterations": state.iteration}))
    result.events.append(("allowed", {"reason": reason}))
    result.system_message = f"loopdeck: loop complete after {state.iteration} iterations ({reason})"
    result.action = "allow"
    return result


def after_skip(aggregate: Aggregate, times: int) -> Aggregate:
    """The count as it will be once the driver marks `times` current task-file tasks skipped."""
    reports = []
    for report in aggregate.sources:
        if report.name == "task_file":
            for _ in range(times):
                report = _skip_one(report)
        reports.append(report)
    return combine(reports, aggregate.checked_at)


def _skip_one(report: SourceReport) -> SourceReport:
    if not report.open_count:
        return report
    items = list(report.items)
    target = next((i for i in items if i.status == "in_progress"), None) or next(
        (i for i in items if i.status == "pending"), None
    )
    pending, in_progress = report.pending, report.in_progress
    if target is not None and target.status == "in_progress":
        in_progress -= 1
    else:
        pending -= 1
    if target is not None:
        items[items.index(target)] = replace(target, status="skipped")
    return replace(
        report, pending=pending, in_progress=in_progress, skipped=report.skipped + 1, items=tuple(items)
    )


def _brief(report: SourceReport) -> dict[str, Any]:
    return {
        "name": report.name,
        "enabled": report.enabled,
        "available": report.available,
        "pending": report.pending,
        "in_progress": report.in_progress,
        "done": report.done,
    }


def set_max(state: LoopState, value: int) -> None:
    """A new limit re-arms the escalation when it lies ahead (or is lifted)."""
    state.max_iterations = value
    if state.escalated and (value == 0 or value > state.iteration):
        state.escalated = False
        if state.waiting_for and state.waiting_for.get("escalation") == "max-iterations":
            state.waiting_for = None
            if state.status == "paused":
                state.status = "running"


def limit_holds(state: LoopState, now: datetime) -> bool:
    """The usage limit the loop waits for has not reset yet."""
    until = parse_iso(str((state.waiting_for or {}).get("until", "")))
    return until is not None and now < until


def lift_limit(state: LoopState, result: Result) -> None:
    """The usage limit's wait is over: the loop goes on, and says so."""
    was = (state.waiting_for or {}).get("reason", "")
    state.waiting_for = None
    result.events.append(("limit-lifted", {"was": was}))


def add_usage(state: LoopState, turn: Turn | None) -> None:
    """Count what the agent reported using this turn (cost, tokens) into the loop's total."""
    if turn is not None and turn.usage:
        for key, value in turn.usage.items():
            state.usage[key] = state.usage.get(key, 0) + int(value)

"""The loop's events besides a Stop: options for an existing loop, a signal, a usage limit
reported apart from a turn, a session adopting a paused loop, a person's resume, a failure, and
a state put back from its backup or rebuilt from the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from loop.core.commands import held_at_limit
from loop.core.model import (
    Aggregate,
    Command,
    JournalEvent,
    LoopState,
    Result,
    Settings,
    Turn,
    replace,
    same_loop,
)
from loop.core.policy import DriverPolicy, named
from loop.core.timeutil import iso_s
from loop.core.transitions import complete, ending_summary, limit_wait, set_max


def configure(
    state: LoopState, settings: Settings, now: datetime, policy: DriverPolicy | None = None
) -> Result:
    """Options given to `run` or `start` for an existing loop, and a driver claiming it
    (`settings.driver`, whose `policy` it is: by default, the one of that name). A driver that
    starts the agent itself, claiming a stopped loop, continues it."""
    state = state.copy()
    result = Result("allow", state)
    changed: dict[str, Any] = {}
    if settings.verify is not None and settings.verify != state.verify:
        state.verify = list(settings.verify)
        changed["verify"] = state.verify
    if settings.verify_allow is not None and settings.verify_allow != state.extra.get("verify_allow"):
        state.extra["verify_allow"] = list(settings.verify_allow)
        changed["verify_allow"] = state.extra["verify_allow"]
    if settings.max_iterations is not None and settings.max_iterations != state.max_iterations:
        changed["max_iterations"] = settings.max_iterations
        set_max(state, settings.max_iterations)
    if settings.limits:
        limits = {**state.limits, **settings.limits}
        if limits != state.limits:
            state.limits = limits
            changed["limits"] = dict(settings.limits)
            if (
                state.waiting_for
                and state.waiting_for.get("escalation") == "max-cost"
                and limits.get("max_cost_micro_usd", 0) > state.usage.get("cost_micro_usd", 0)
            ):
                state.waiting_for = None  # a new budget lets the agent work again
                state.status = "running"
    if settings.notify is not None and settings.notify != state.notify:
        state.notify = list(settings.notify)
        changed["notify"] = state.notify
    if settings.runner is not None:
        state.extra["runner"] = dict(settings.runner)
    if settings.driver is not None:
        state.driver = settings.driver
        state.pid = settings.pid
        if (policy or named(settings.driver)).starts_agent:
            if state.status in ("stopped", "failed"):
                state.status = "running"  # `loopdeck run` on a stopped loop continues it
                result.events.append(("resumed", {"source": "run"}))
            elif state.status in ("paused", "stopping", "initializing") and state.waiting_for is None:
                state.status = "running"
    if changed:
        result.events.append(("configured", changed))
    return result


def usage_limited(state: LoopState, reason: str, resets_at: str | None, now: datetime) -> Result:
    """Claude Code ended a turn on a usage or rate limit (its StopFailure hook): the loop waits
    for the reset. A hook loop cannot restart its own session, so the wait is recorded (and a
    person told); the next Stop, once someone continues the session, goes on normally."""
    if not state.active:
        return Result("allow", None)
    state = state.copy()
    return limit_wait(Result("allow", state), state, Turn(limited=reason, resets_at=resets_at), now)


def adopt(state: LoopState, session_id: str, transcript_path: str | None, now: datetime) -> Result:
    """A person resumes a paused loop from a new Claude Code session (`/orchestrator-loop` with
    no prompt): the loop moves to that session, or its Stops would be ignored as another's.
    Only a paused loop is moved; a running one stays with the session that runs it."""
    if state.status != "paused" or state.session_id in (None, session_id):
        return Result("allow", None)
    state = state.copy()
    previous = state.session_id
    state.session_id = session_id
    state.transcript_path = transcript_path or None
    state.pid = None  # the old session's process says nothing of this one (its Stop records it)
    result = Result("allow", state)
    result.events.append(
        ("session-bound", {"session_id": session_id, "previous": previous, "by": "/orchestrator-loop"})
    )
    return result


def interrupt(state: LoopState, pause: bool, reason: str, now: datetime) -> Result:
    """A signal to the runner: SIGINT pauses the loop (resumable), SIGTERM stops it."""
    if not state.active:
        return Result("allow", None)
    state = state.copy()
    result = Result("allow", state)
    if pause:
        state.status = "paused"
        state.waiting_for = {"kind": "pause", "reason": reason, "since": iso_s(now)}
        result.events.append(("paused", {"reason": reason}))
    else:
        state.status = "stopped"
        state.waiting_for = None
        result.events.append(("stopped", {"reason": reason}))
    return result


def restore(
    backup: LoopState, queued: list[Command], applied: set[str], current: tuple[str, str] | None = None
) -> Result:
    """Put a backup back without applying any command twice: the backup's queue offset may be
    older than the commands already applied (their ids are in the journal), so the offset moves
    past every applied one.

    A restore only ever brings back the same loop: `current` is which loop the folder holds
    (its `started_at` and `loop_id`, None when nothing says). The backup of a loop that ended
    before it (a completed one archived, one `start --force` replaced, even in the same second)
    is refused: nothing is written, and the reason is the Result's message."""
    if current is not None and not same_loop(backup.started_at, backup.loop_id, *current):
        return Result(
            "allow",
            None,
            system_message=(
                f"the backup is of an earlier loop (started {backup.started_at or 'at an unknown time'}), "
                f"not of the loop in this folder (started {current[0]}); restoring it would bring that "
                "loop back: rebuild this one from the journal instead (loopdeck resume --from journal)"
            ),
        )
    state = backup.copy()
    result = Result("allow", state)
    skipped = [c for c in queued if c.id in applied]
    if skipped:
        state.control_offset = max(c.end for c in skipped)
    result.offset = state.control_offset
    result.events.append(("restored", {"from": "backup", "already_applied": len(skipped)}))
    return result


RESUMABLE = ("gone", "paused", "waiting", "stopping")
"""The classifications `resume_flow` acts on (see `loop.drivers.classify`)."""


def resume_flow(
    state: LoopState,
    kind: str,
    now: datetime,
    sources: Aggregate | None = None,
    commands: list[Command] | None = None,
) -> Result:
    """A person resumes an interrupted loop (`loopdeck resume`, the monitor's prompt).

    `kind` is the workspace's classification: `gone` (running, its driver dead: the loop goes
    on from its iteration, the dead driver's pid forgotten), `paused` or `waiting` (the pause,
    question, escalation or usage limit is lifted, as a `resume` command would), `stopping`
    (the loop is marked complete and archived, with `sources` counted for its summary). The
    iteration never moves back; a hook loop whose session closed forgets it, so the next
    session that stops in the workspace (`claude --continue`, `/orchestrator-loop`) drives it.
    A loop waiting at its iteration limit is left as it is (`held_at_limit`), unless the queued
    `commands` raise the limit (its next driver applies them)."""
    if kind not in RESUMABLE or not state.active or held_at_limit(state, commands or []) is not None:
        return Result("allow", None)
    state = state.copy()
    result = Result("allow", state)
    if kind == "stopping":
        return complete(result, state, now, "marked complete at resume", sources)
    was = state.waiting_for or {}
    if state.status in ("paused", "initializing"):
        state.status = "running"
    state.waiting_for = None
    state.stuck = {k: v for k, v in state.stuck.items() if k in ("tasks", "mode")}
    previous = state.pid
    state.pid = None
    if named(state.driver).in_session and previous is not None:
        state.session_id = None  # its session is closed: the next one to stop here drives it
    data: dict[str, Any] = {"from": kind, "iteration": state.iteration, "source": "resume"}
    if was:
        data["was"] = was.get("reason", "")
    if previous is not None:
        data["previous_pid"] = previous
    result.events.append(("resumed", data))
    return result


def fail(state: LoopState, reason: str, now: datetime, sources: Aggregate | None = None) -> Result:
    """The loop cannot go on (its state cannot be driven, its agent cannot start at all): it
    ends `failed`, with a summary; a person reads why and may start it anew."""
    if not state.active:
        return Result("allow", None)
    state = state.copy()
    state.status = "failed"
    state.waiting_for = None
    result = Result("allow", state)
    result.events.append(("failed", {"reason": reason}))
    result.effects = replace(result.effects, summary=ending_summary("failed", reason, state, sources, now))
    return result


def rebuild(
    base: LoopState | None,
    events: list[JournalEvent],
    queued: list[Command],
    applied: set[str],
) -> tuple[Result, list[str]]:
    """A state for a corrupt file, from the journal: the iteration, status (and why it waits),
    verification and limits replay from the events of the last loop started; the queue offset
    moves past every command the journal says was applied, so none is applied twice. What the
    journal does not hold (the prompt, the task file, the checks) comes from `base` (the backup,
    when it is readable) or stays at its default; the report says which is which."""
    report: list[str] = []
    starts = [i for i, e in enumerate(events) if e.kind == "loop-started"]
    mine = events[starts[-1] :] if starts else events
    started = mine[0].data if starts else {}
    if (
        base is not None
        and started.get("started_at")
        and not same_loop(
            base.started_at, base.loop_id, str(started["started_at"]), str(started.get("loop_id") or "")
        )
    ):
        base = None  # the backup of an earlier loop: nothing of it is this loop's
    state = base.copy() if base is not None else LoopState()
    if base is not None:
        report.append("prompt, task file and checks: from the backup")
    elif _settings_from(state, started):
        report.append("prompt, task file and checks: from the journal (the loop's start)")
    else:
        report.append("prompt, task file and checks: unknown, left at defaults")
    if starts:
        first = mine[0]
        state.started_at = str(started.get("started_at") or first.ts)
        state.loop_id = str(started.get("loop_id") or state.loop_id)
        if isinstance(started.get("max_iterations"), int):
            state.max_iterations = int(started["max_iterations"])
        if not state.body.strip() and started.get("prompt"):
            state.body = f"\n{started['prompt']}\n"
    iterations = [e.iteration for e in mine if isinstance(e.iteration, int)]
    state.iteration = max([state.iteration if base else 0, *iterations])
    report.append(f"iteration: {state.iteration} (the highest the journal names)")
    status, waiting = "running", None
    state.verification_mode, state.verification_remaining = False, 0
    for event in mine:
        data = event.data
        if event.kind == "paused":
            status = "paused"
            kind = str(data.get("waiting_for") or "pause")
            waiting = {"kind": kind, "reason": str(data.get("reason") or ""), "since": event.ts}
        elif event.kind in ("resumed", "limit-lifted", "answered"):
            if status == "paused":
                status, waiting = "running", None
        elif event.kind in ("stopped", "completed", "failed"):
            status, waiting = event.kind, None
        elif event.kind == "escalation" and waiting is None:
            state.escalated = state.escalated or data.get("kind") == "max-iterations"
        elif event.kind == "verification-mode":
            state.verification_mode = True
            state.verification_remaining = int(data.get("loops", state.verify_loops) or 0)
        elif event.kind == "verification-loop":
            state.verification_remaining = max(0, int(data.get("of", 0) or 0) - int(data.get("loop", 0) or 0))
        elif event.kind == "verification-interrupted":
            state.verification_mode, state.verification_remaining = False, 0
        elif event.kind == "configured" and isinstance(data.get("max_iterations"), int):
            state.max_iterations = int(data["max_iterations"])
        elif event.kind == "runner-started":
            state.driver = "runner"
    if status == "paused" and waiting is not None and waiting["kind"] == "escalation":
        last = next((e for e in reversed(mine) if e.kind == "escalation"), None)
        if last is not None and last.data.get("kind"):
            waiting["escalation"] = str(last.data["kind"])
    state.status, state.waiting_for = status, waiting
    state.pid = None
    report.append(f"status: {status}" + (f" (waiting: {waiting['reason']})" if waiting else ""))
    if state.verification_mode:
        report.append(f"verification: {state.verification_remaining} loop(s) remaining")
    done = [c for c in queued if c.id in applied]
    state.control_offset = max([state.control_offset if base else 0, *(c.end for c in done)])
    report.append(f"commands: {len(done)} already applied, never applied again")
    result = Result("allow", state, offset=state.control_offset)
    data = {"from": "journal", "iteration": state.iteration, "status": status}
    result.events.append(("state-rebuilt", data))
    return result, report


def _settings_from(state: LoopState, started: Mapping[str, Any]) -> bool:
    """Set what a loop's `loop-started` event keeps (its task file, checks, limits) on a state
    rebuilt without a backup; True when it kept any (older journals keep only the prompt)."""
    found = False
    if isinstance(started.get("task_file"), str) and started["task_file"]:
        state.task_file = started["task_file"]
        found = True
    for key in ("check_tasks", "check_github"):
        if isinstance(started.get(key), bool):
            setattr(state, key, started[key])
            found = True
    verify = started.get("verify")
    if isinstance(verify, list) and all(isinstance(v, str) for v in verify):
        state.verify = list(verify)
        found = True
    if isinstance(started.get("github_project"), str):
        state.github_project_id = started["github_project"]
    if isinstance(started.get("promise"), str) and started["promise"]:
        state.completion_promise = started["promise"]
    limits = started.get("limits")
    if isinstance(limits, dict) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in limits.values()
    ):
        state.limits = {str(k): int(v) for k, v in limits.items()}
    return found

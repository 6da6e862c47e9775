"""A person's commands to a loop, applied in order: pause, resume, stop, complete, answer, say,
the iteration limit and skip mean the same for every driver, and who may send which is one rule.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from loop.core.model import COMMANDS, Aggregate, Command, LoopState, Result, replace
from loop.core.timeutil import iso_s
from loop.core.transitions import after_skip, complete, ending_summary, set_max

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""A stand-in clock for `needs_sources`' dry run, whose state is thrown away."""


def replayed(
    state: LoopState, commands: list[Command], sources: Aggregate | None
) -> tuple[LoopState, Result]:
    """A copy of `state` as the queued `commands` leave it, and what applying them asks for:
    what `decide` will see, found before the driver does the work it may not need."""
    interim = state.copy()
    scratch = Result("allow", interim)
    for command in commands:
        if not refused(scratch, command):
            apply_command(interim, command, sources, scratch, _EPOCH)
    return interim, scratch


def held_at_limit(state: LoopState, commands: list[Command]) -> str | None:
    """Why a resume does not lift the loop's wait: a loop waiting at its iteration limit goes
    on once the limit lies ahead (raised, or lifted with 0, as the queued `commands` may do),
    never past it on a resume. None when a resume would lift the wait."""
    if commands:
        state, _scratch = replayed(state, commands, None)
    waiting = state.waiting_for or {}
    if state.status != "paused" or waiting.get("escalation") != "max-iterations":
        return None
    if state.max_iterations <= 0 or state.iteration < state.max_iterations:
        return None
    return (
        f"the loop is at its limit of {state.max_iterations} iterations: raise it first "
        "(`loopdeck set-max-iterations N`, 0 for no limit), and the loop goes on"
    )


def commands(state: LoopState, queued: list[Command], sources: Aggregate | None, now: datetime) -> Result:
    """A person's commands to a whole loop of workers, in order, as for the other drivers: a
    stop or a forced completion is final; pause, resume, answer, say and the limit mean what
    they mean everywhere."""
    state = state.copy()
    result = Result("allow", state)
    forced = apply_all(state, result, queued, sources, now)
    if forced is not None:
        return complete(result, state, now, "forced by user", sources, forced.reason)
    if state.status == "stopped":
        result.events.append(("stopped", {"reason": "stop command"}))
        summary = ending_summary("stopped", "stopped by a person", state, sources, now)
        result.effects = replace(result.effects, summary=summary)
    return result


def apply_all(
    state: LoopState, result: Result, queued: list[Command], sources: Aggregate | None, now: datetime
) -> Command | None:
    """Apply the queued commands in order (a refused one is journaled and skipped), recording
    each outcome in `result`; the forced completion among them, if any (it is final)."""
    forced: Command | None = None
    for command in queued:
        if refused(result, command):
            continue
        outcome = apply_command(state, command, sources, result, now)
        result.applied.append((command, outcome))
        if command.kind == "complete" and forced is None and outcome == "completion forced":
            forced = command
    return forced


PERSON_ONLY = tuple(kind for kind in COMMANDS if kind != "pause")
"""Commands applied only when a person on this machine sent them (`Command.person`: the line is
signed with this user's key). Anyone may pause: stopping work is always safe; everything else
ends a loop, lifts a wait for a person, or speaks to the agent as a person would."""

NOT_A_PERSON = "not sent by a person on this machine"


def refusal(command: Command) -> str | None:
    """Why `command` is not applied (None: it is). The one rule for every driver."""
    if command.kind in PERSON_ONLY and not command.person:
        return NOT_A_PERSON
    return None


def refused(result: Result, command: Command) -> bool:
    """Journal a refused command (`command-refused`) and say so: it is skipped, never applied,
    and its line is read past like any other, so it is never tried again."""
    why = refusal(command)
    if why is None:
        return False
    data: dict[str, Any] = {"id": command.id, "command": command.kind, "source": command.source, "why": why}
    if command.target:
        data["worker"] = command.target
    result.events.append(("command-refused", data))
    return True


def refuse(state: LoopState, command: Command) -> Result:
    """A Result that only refuses `command` (for the drivers that route a command elsewhere
    than `decide`/`commands`, e.g. to one worker): the state unchanged, the refusal journaled."""
    result = Result("allow", state.copy())
    refused(result, command)
    return result


ANSWER_KEEPS_WAITING = ("pause", "usage-limit")
"""What an answer does not lift: a person's pause (only their resume does) and a usage limit's
wait (its reset does). An answer lifts what asked a person: a question, an escalation."""


def apply_command(
    state: LoopState, command: Command, sources: Aggregate | None, result: Result, now: datetime
) -> str:
    kind = command.kind
    events = result.events
    if state.status == "stopped" or any(c.kind == "complete" for c, _ in result.applied):
        return "ignored: the loop is ending"  # a stop or a forced completion is final
    if kind == "pause":
        if state.status == "paused":
            return "already paused"
        state.status = "paused"
        reason = command.reason or f"paused from the {command.source}"
        state.waiting_for = {"kind": "pause", "reason": reason, "since": iso_s(now)}
        events.append(("paused", {"reason": command.reason, "source": command.source}))
        return "paused"
    if kind == "resume":
        if state.status != "paused":
            return f"not paused ({state.status})"
        held = held_at_limit(state, [])
        if held is not None:
            return f"not resumed: {held}"
        state.status = "running"
        state.waiting_for = None
        state.stuck = {k: v for k, v in state.stuck.items() if k in ("tasks", "mode")}
        events.append(("resumed", {"source": command.source}))
        return "resumed"
    if kind == "stop":
        state.status = "stopped"
        state.waiting_for = None
        return "stopped"
    if kind == "complete":
        return "completion forced"
    if kind == "answer":
        state.extra["answer"] = command.reason or ""
        events.append(("answered", {"answer": command.reason, "source": command.source}))
        if state.status == "paused" and state.waiting_kind not in ANSWER_KEEPS_WAITING:
            # the loop asked a person (the agent's question, an escalation): this is the answer
            asked = (state.waiting_for or {}).get("question")
            if asked:
                state.extra["answered"] = asked
            state.status = "running"
            state.waiting_for = None
            events.append(("resumed", {"source": command.source}))
            return "answer kept for the next prompt"
        if state.status == "paused":
            # An answer is not a resume: a loop a person paused waits for their resume, one held
            # by a usage limit for its reset; the answer reaches the agent when it goes on.
            return "answer kept for the next prompt; no question was pending, the loop stays paused"
        return "answer kept for the next prompt"
    if kind == "say":
        state.extra["notes"] = [*state.extra.get("notes", []), command.reason or ""]
        events.append(("said", {"note": command.reason, "source": command.source}))
        return "note kept for the next prompt"
    if kind == "set-max-iterations":
        assert command.value is not None
        old = state.max_iterations
        set_max(state, command.value)
        return f"max iterations {old} → {command.value}"
    if kind == "skip":
        if state.verification_mode:
            if state.verification_remaining > 0:
                number = state.verify_loops - state.verification_remaining + 1
                state.verification_remaining -= 1
                events.append(("verification-skipped", {"loop": number}))
                return f"verification loop {number} skipped"
            return "no verification loop left to skip"
        if sources is None:
            result.effects = replace(result.effects, skip_tasks=result.effects.skip_tasks + 1)
            return "skipping the current task-file task"
        report = after_skip(sources, result.effects.skip_tasks).by_name("task_file")
        if report is None or not report.available or not report.open_count:
            return "nothing to skip: the task file has no pending task"
        result.effects = replace(result.effects, skip_tasks=result.effects.skip_tasks + 1)
        return "skipping the current task-file task"
    return f"unknown command {kind}"  # pragma: no cover - the queue refuses them

"""The one brain: given the loop's state, what the agent just said, the task sources and the
pending commands, decide whether the agent may stop, and what the loop's state becomes.

It is a pure function. It reads no file and writes none: the drivers (the Stop hook, the runner)
gather its inputs and carry out its Effects, so every rule of seed 000 §3.3–3.6 is tested here
without processes, clocks or disks.

The flow at each Stop:

1. no loop, another session's Stop, or a loop that has ended → allow, untouched;
2. apply the control commands, in order (pause, resume, skip, complete, stop, set-max);
3. paused or stopped → allow; forced completion → archive, allow;
4. a completion signal in the agent's own last words → archive, allow;
5. count the sources: one that cannot be read → conservative block; pending work → block with
   the continuation prompt (the escalation prompt past max_iterations); nothing pending →
   verification loops, then archive and allow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from loop.control import Command
from loop.prompts import (
    SOURCE_LABELS,
    cap,
    conservative_prompt,
    continuation_prompt,
    escalation_prompt,
    failure_prompt,
    finish_line,
    iteration_of,
    verification_prompt,
)
from loop.signals import completion_signal
from loop.sources.aggregate import Aggregate, combine
from loop.sources.base import SourceReport
from loop.state import LoopState
from loop.timeutil import iso_s, parse_iso

DEFAULT_BLOCK_CAP = 8


@dataclass(frozen=True)
class StopInput:
    """What a driver knows when the agent tries to stop."""

    last_text: str | None
    session_id: str | None = None
    transcript_path: str | None = None
    stop_hook_active: bool = False
    block_cap: int | None = DEFAULT_BLOCK_CAP
    """Claude Code's consecutive-block cap; None or 0 = no cap."""
    ralph_active: bool = False
    driver: str = "hook"
    verification_failure: str | None = None
    """Verification commands failed after this turn (their output): the work is not done,
    whatever the agent said or the sources show (seed 004: any fail → continue)."""


@dataclass(frozen=True)
class Effects:
    """What the driver must do beyond writing the new state and the events."""

    archive: dict[str, Any] | None = None
    """Archive the loop with this summary (and remove the live state file)."""
    skip_task: bool = False
    """Mark the current task of the task file skipped (`- [-]`)."""


@dataclass
class Result:
    action: str
    """"block" or "allow"."""
    state: LoopState | None
    """The state to write (None: leave the file alone)."""
    reason: str | None = None
    """For a block: the prompt Claude reads next."""
    system_message: str | None = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    applied: list[tuple[Command, str]] = field(default_factory=list)
    effects: Effects = field(default_factory=Effects)

    @property
    def blocked(self) -> bool:
        return self.action == "block"


Sources = Aggregate | Callable[[], Aggregate]


# --- the decision --------------------------------------------------------------------------


def decide(
    state: LoopState | None,
    stop: StopInput,
    commands: list[Command],
    sources: Sources,
    now: datetime,
) -> Result:
    if state is None:
        return Result("allow", None)
    if stop.session_id and state.session_id and stop.session_id != state.session_id:
        return Result("allow", None)  # another session in this folder: not our loop
    if not state.active:
        return Result("allow", None)

    state = replace(state, verify=list(state.verify), extra=dict(state.extra))
    result = Result("allow", state)
    events = result.events
    if stop.session_id and not state.session_id and stop.driver == "hook":
        state.session_id = stop.session_id
        events.append(("session-bound", {"session_id": stop.session_id}))
    if stop.transcript_path and stop.transcript_path != state.transcript_path:
        state.transcript_path = stop.transcript_path
    if state.driver != stop.driver:
        state.driver = stop.driver
        if stop.driver == "hook":
            state.pid = None
    if state.status == "initializing":
        state.status = "running"
    if not stop.stop_hook_active:
        state.consecutive_blocks = 0
    if stop.ralph_active and not state.extra.get("ralph_warned"):
        state.extra["ralph_warned"] = True
        events.append(("warning", {"message": RALPH_WARNING}))

    lazy: list[Aggregate] = []

    def counted() -> Aggregate:
        if not lazy:
            lazy.append(sources() if callable(sources) else sources)
        return lazy[0]

    forced: Command | None = None
    for command in commands:
        outcome = _apply(state, command, counted, result)
        result.applied.append((command, outcome))
        if command.kind == "complete":
            forced = command

    if result.effects.skip_task and lazy:
        lazy[0] = _after_skip(lazy[0])

    if forced is not None:
        return _complete(result, state, now, "forced by user", counted, forced.reason)
    if state.status == "stopped":
        events.append(("stopped", {"reason": "stop command"}))
        events.append(("allowed", {"reason": "loop stopped"}))
        return result
    if state.status == "paused":
        events.append(("allowed", {"reason": "loop paused"}))
        result.system_message = f"loopdeck: loop paused at iteration {iteration_of(state)} (loopdeck resume)"
        return result

    signal = signalled(state, stop.last_text)
    if signal is not None and stop.verification_failure is None:
        return _complete(result, state, now, f"{signal} signalled by the agent", counted)

    aggregate = counted()
    if aggregate.uncertain and not state.extra.get("uncertain_escalated"):
        # Once per stretch of unreadable sources: a person should know the loop is guessing.
        state.extra["uncertain_escalated"] = True
        names = ", ".join(f"{SOURCE_LABELS.get(r.name, r.name)} ({r.error})" for r in aggregate.unavailable)
        events.append(("escalation", {"kind": "uncertain-sources", "reason": f"cannot read {names}"}))
    elif not aggregate.uncertain:
        state.extra.pop("uncertain_escalated", None)
    if stop.driver == "runner" and state.iteration == 0 and not aggregate.uncertain:
        # The runner's first turn is the loop's own prompt: the agent has not worked yet, so an
        # empty task list means "start", not "verify".
        prompt = (
            continuation_prompt(state, aggregate)
            if aggregate.pending_total
            else cap(f"{state.prompt}\n\n{finish_line(state)}")
        )
        return _block(
            result, state, stop, prompt, "Orchestrator iteration {of} | first turn", aggregate, "work"
        )
    if stop.verification_failure is not None:
        if state.verification_mode:
            _leave_verification(state, events, "verification commands failed")
        return _block(
            result,
            state,
            stop,
            failure_prompt(state, stop.verification_failure, aggregate),
            "Orchestrator iteration {of} | VERIFICATION FAILED: fix it before anything else",
            aggregate,
            "work",
        )
    if aggregate.uncertain:
        names = ", ".join(SOURCE_LABELS.get(r.name, r.name) for r in aggregate.unavailable)
        if state.verification_mode:
            _leave_verification(state, events, "a task source could not be read")
        return _block(
            result,
            state,
            stop,
            conservative_prompt(state, aggregate),
            f"Orchestrator iteration {{of}} | TASK CHECK FAILED: cannot read {names}",
            aggregate,
            "uncertain",
        )
    if aggregate.pending_total > 0:
        if state.verification_mode:
            _leave_verification(state, events, "new task(s) appeared")
        n = len(aggregate.with_pending)
        message = (
            f"Orchestrator iteration {{of}} | {aggregate.pending_total} pending task"
            f"{'s' if aggregate.pending_total != 1 else ''} across {n} source{'s' if n != 1 else ''}"
        )
        return _block(result, state, stop, continuation_prompt(state, aggregate), message, aggregate, "work")

    # Nothing pending: seed 000 §3.4's verification loops before the exit.
    if not state.verification_mode:
        state.verification_mode = True
        state.verification_remaining = state.verify_loops
        events.append(("verification-mode", {"loops": state.verify_loops}))
    if state.verification_remaining <= 0:
        return _complete(result, state, now, "all sources empty and verified", counted)
    number = state.verify_loops - state.verification_remaining + 1
    state.verification_remaining -= 1
    events.append(("verification-loop", {"loop": number, "of": state.verify_loops}))
    message = f"Orchestrator iteration {{of}} | verification loop {number} of {state.verify_loops}"
    return _block(result, state, stop, verification_prompt(state, number), message, aggregate, "verification")


def signalled(state: LoopState, text: str | None) -> str | None:
    """The completion signal in the agent's own words, if any: what it says, minus anything it
    quotes from the prompt it was given. The hook asks this too, before running verification."""
    return completion_signal(text, state.promise, echoed=f"{state.prompt}\n{finish_line(state)}")


RALPH_WARNING = (
    "WARNING: Both orchestrator-loop AND ralph-loop are active simultaneously! "
    "This may cause conflicts. Consider using only one at a time."
)


def _leave_verification(state: LoopState, events: list[tuple[str, dict[str, Any]]], why: str) -> None:
    state.verification_mode = False
    state.verification_remaining = 0
    events.append(("verification-interrupted", {"reason": why}))


def _block(
    result: Result,
    state: LoopState,
    stop: StopInput,
    prompt: str,
    message: str,
    sources: Aggregate,
    mode: str,
) -> Result:
    state.iteration += 1
    state.consecutive_blocks += 1
    events = result.events
    over = state.max_iterations > 0 and state.iteration > state.max_iterations
    if over and mode in ("work", "uncertain"):
        prompt = escalation_prompt(state, sources)
        message += f" | ESCALATION: past {state.max_iterations} iterations"
        if not state.escalated:
            state.escalated = True
            events.append(
                (
                    "escalation",
                    {
                        "reason": f"{state.max_iterations} iterations reached with "
                        f"{sources.pending_total} task(s) pending",
                        "kind": "max-iterations",
                        "max_iterations": state.max_iterations,
                        "pending_total": sources.pending_total,
                    },
                )
            )
    answer = state.extra.pop("answer", None)
    if answer:
        prompt = cap(f"A PERSON ANSWERED YOUR QUESTION:\n{answer}\n\n{prompt}")
    text = message.replace("{of}", iteration_of(state))
    if stop.ralph_active:
        text += " | WARNING: ralph-loop is active too"
    block_cap = stop.block_cap
    if block_cap and state.consecutive_blocks >= block_cap:
        warning = (
            f"block {state.consecutive_blocks} of Claude Code's cap of {block_cap}: it will end this turn "
            "anyway; set CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0 (loopdeck install does) and say 'continue'"
        )
        text += f" | {warning}"
        events.append(("warning", {"message": warning}))
    state.current_task = _current_task(sources)
    result.action = "block"
    result.reason = prompt
    result.system_message = text
    events.append(
        (
            "blocked",
            {
                "message": text,
                "mode": mode,
                "pending_total": sources.pending_total,
                "max_iterations": state.max_iterations,
            },
        )
    )
    return result


def _current_task(sources: Aggregate) -> str | None:
    for report in sources.with_pending:
        items = report.pending_items()
        in_progress = [i for i in items if i.status == "in_progress"]
        chosen = in_progress or items
        if chosen:
            return chosen[0].title
    return None


def _complete(
    result: Result,
    state: LoopState,
    now: datetime,
    reason: str,
    counted: Callable[[], Aggregate],
    note: str | None = None,
) -> Result:
    state.status = "completed"
    state.verification_mode = False
    try:
        aggregate: Aggregate | None = counted()
    except Exception:  # the summary is a courtesy; a source failing here must not block the exit
        aggregate = None
    started = parse_iso(state.started_at)
    summary: dict[str, Any] = {
        "outcome": "completed",
        "reason": reason,
        "ended_at": iso_s(now),
        "iterations": state.iteration,
        "duration_s": round((now - started).total_seconds(), 1) if started else None,
        "pending_at_end": aggregate.pending_total if aggregate else None,
        "sources": [_brief(r) for r in aggregate.sources] if aggregate else [],
    }
    if note:
        summary["note"] = note
    result.effects = replace(result.effects, archive=summary)
    result.events.append(("completed", {"reason": reason, "iterations": state.iteration}))
    if aggregate is not None and aggregate.pending_total and "forced" not in reason:
        result.events.append(
            (
                "warning",
                {
                    "message": f"the agent signalled completion with {aggregate.pending_total} "
                    "task(s) still pending in the sources"
                },
            )
        )
    result.events.append(("allowed", {"reason": reason}))
    result.system_message = f"loopdeck: loop complete after {state.iteration} iterations ({reason})"
    result.action = "allow"
    return result


def _after_skip(aggregate: Aggregate) -> Aggregate:
    """The count as it will be once the driver marks the current task-file task skipped."""
    reports = []
    for report in aggregate.sources:
        if report.name == "task_file" and report.open_count:
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
            report = replace(
                report,
                pending=pending,
                in_progress=in_progress,
                skipped=report.skipped + 1,
                items=tuple(items),
            )
        reports.append(report)
    return combine(reports, aggregate.checked_at)


def _brief(report: SourceReport) -> dict[str, Any]:
    return {
        "name": report.name,
        "enabled": report.enabled,
        "available": report.available,
        "pending": report.pending,
        "in_progress": report.in_progress,
        "done": report.done,
    }


def _apply(state: LoopState, command: Command, counted: Callable[[], Aggregate], result: Result) -> str:
    kind = command.kind
    events = result.events
    if kind == "pause":
        if state.status == "paused":
            return "already paused"
        state.status = "paused"
        events.append(("paused", {"reason": command.reason, "source": command.source}))
        return "paused"
    if kind == "resume":
        if state.status != "paused":
            return f"not paused ({state.status})"
        state.status = "running"
        events.append(("resumed", {"source": command.source}))
        return "resumed"
    if kind == "stop":
        state.status = "stopped"
        return "stopped"
    if kind == "complete":
        return "completion forced"
    if kind == "answer":
        state.extra["answer"] = command.reason or ""
        events.append(("answered", {"answer": command.reason, "source": command.source}))
        if state.status == "paused":
            state.status = "running"
            events.append(("resumed", {"source": command.source}))
        return "answer kept for the next prompt"
    if kind == "set-max-iterations":
        assert command.value is not None
        old = state.max_iterations
        state.max_iterations = command.value
        if state.escalated and (command.value == 0 or command.value > state.iteration):
            state.escalated = False
        return f"max iterations {old} → {command.value}"
    if kind == "skip":
        if state.verification_mode:
            if state.verification_remaining > 0:
                number = state.verify_loops - state.verification_remaining + 1
                state.verification_remaining -= 1
                events.append(("verification-skipped", {"loop": number}))
                return f"verification loop {number} skipped"
            return "no verification loop left to skip"
        report = counted().by_name("task_file")
        if report is None or not report.available or not report.open_count:
            return "nothing to skip: the task file has no pending task"
        result.effects = replace(result.effects, skip_task=True)
        return "skipping the current task-file task"
    return f"unknown command {kind}"  # pragma: no cover - control.py refuses them

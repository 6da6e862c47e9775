"""The one brain: every transition of the loop is decided here, and nowhere else.

Pure functions of (state, event, commands, source counts, now) → Result: the new state, the
events to journal, the prompt for the agent and the effects (archive, skip marks) for the driver
to carry out. No file, no process, no clock, not even through a callback: a driver gathers the
inputs (asking `needs_sources` and `wants_verification` first, so it does no work the decision
will not use) and `loop.drivers.writer` carries the Result out. So every rule is tested here on a fixed
clock, without processes or disks, and both drivers keep the same rules.

The events it takes:

* a Stop (`decide`): the hook's Stop, or the runner's end of an agent turn (`StopInput.turn`
  then carries what the runner saw: failure, error signature, progress mark);
* `configure`: options given to `run` or `start` for an existing loop;
* `interrupt`: a signal to the runner (SIGINT pauses, SIGTERM stops);
* `restore`: a backup put back, without re-applying a command already applied.

The flow at each Stop:

1. no loop, another session's Stop, or a loop that has ended → allow, untouched;
2. apply the control commands, in order; a stop or a forced completion is final;
3. stopped or paused → allow; forced completion → archive, allow;
4. (runner) the turn: a question pauses; a failure, the same error or no progress counted,
   and past their thresholds the loop escalates (pauses, waiting for a person);
5. count the sources: unreadable → conservative block (a completion claimed after it → a
   person decides); a completion signal is a claim,
   checked against the sources and the verification commands; pending work → block with the
   continuation prompt (escalation past max_iterations); nothing pending → verification loops,
   then (verified) archive and allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from loop.core.model import (
    COMMANDS,
    DEFAULT_BLOCK_CAP,
    SOURCE_LABELS,
    Aggregate,
    Command,
    JournalEvent,
    LoopState,
    Result,
    Settings,
    SourceReport,
    StopInput,
    Turn,
    combine,
    replace,
    same_loop,
)
from loop.core.prompts import (
    answered_prompt,
    cap,
    claimed_prompt,
    conservative_prompt,
    continuation_prompt,
    escalation_prompt,
    failure_prompt,
    finish_line,
    first_prompt,
    iteration_of,
    unverified_prompt,
    vanished_reason,
    verification_prompt,
)
from loop.core.redact import redact
from loop.core.signals import completion_signal, question
from loop.core.timeutil import iso_s, parse_iso

if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import Any

__all__ = [
    "DEFAULT_BLOCK_CAP",
    "Result",
    "StopInput",
    "admit",
    "commands",
    "configure",
    "decide",
    "ending_summary",
    "escalate",
    "fail",
    "finish",
    "held_at_limit",
    "interrupt",
    "needs_look",
    "needs_sources",
    "rebuild",
    "refusal",
    "refuse",
    "restore",
    "resume_flow",
    "worker_turn",
]


_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""A stand-in clock for `needs_sources`' dry run, whose state is thrown away."""

RALPH_WARNING = (
    "WARNING: Both orchestrator-loop AND ralph-loop are active simultaneously! "
    "This may cause conflicts. Consider using only one at a time."
)


# --- asking first --------------------------------------------------------------------------


def ours(state: LoopState | None, stop: StopInput) -> bool:
    """Is this Stop the loop's business at all (a live loop, this session's)?"""
    if state is None or not state.active:
        return False
    return not (stop.session_id and state.session_id and stop.session_id != state.session_id)


def needs_sources(state: LoopState | None, stop: StopInput, commands: list[Command]) -> bool:
    """Will `decide` look at the task sources? False when a pause or stop settles the Stop."""
    if not ours(state, stop) or (stop.unconfirmed and stop.driver == "hook"):
        return False
    assert state is not None
    interim, scratch = _replayed(state, commands, None)
    forced = any(command.kind == "complete" and refusal(command) is None for command in commands)
    if forced or scratch.effects.skip_tasks or interim.status == "stopped":
        return True  # the summaries and the skip all name tasks
    return interim.status not in ("paused", "stopped")


def needs_look(
    state: LoopState, turn: Turn | None, commands: list[Command], sources: Aggregate | None
) -> bool:
    """Must the runner say whether the workspace changed during `turn` (`Turn.changed`) before
    `decide`? Only for a working turn the agent finished whose task counts, as the decision
    sees them (after the queued `commands`: a skip takes a task off them), did not change: a
    change in them is progress whatever the workspace shows, and review and verification turns
    are never counted as stuck, so otherwise the runner need not wait for git."""
    if sources is None or turn is None:
        return False
    if turn.failure is not None or turn.interrupted is not None or turn.limited is not None:
        return False  # not judged for progress
    if commands:
        state, scratch = _replayed(state, commands, sources)
        if scratch.effects.skip_tasks:
            sources = _after_skip(sources, scratch.effects.skip_tasks)
    return _no_task_progress(state, _task_mark(sources))


def _replayed(
    state: LoopState, commands: list[Command], sources: Aggregate | None
) -> tuple[LoopState, Result]:
    """A copy of `state` as the queued `commands` leave it, and what applying them asks for:
    what `decide` will see, found before the driver does the work it may not need."""
    interim = state.copy()
    scratch = Result("allow", interim)
    for command in commands:
        if not _refused(scratch, command):
            _apply(interim, command, sources, scratch, _EPOCH)
    return interim, scratch


def held_at_limit(state: LoopState, commands: list[Command]) -> str | None:
    """Why a resume does not lift the loop's wait: a loop waiting at its iteration limit goes
    on once the limit lies ahead (raised, or lifted with 0, as the queued `commands` may do),
    never past it on a resume. None when a resume would lift the wait."""
    if commands:
        state, _scratch = _replayed(state, commands, None)
    waiting = state.waiting_for or {}
    if state.status != "paused" or waiting.get("escalation") != "max-iterations":
        return None
    if state.max_iterations <= 0 or state.iteration < state.max_iterations:
        return None
    return (
        f"the loop is at its limit of {state.max_iterations} iterations: raise it first "
        "(`loopdeck set-max-iterations N`, 0 for no limit), and the loop goes on"
    )


def wants_verification(state: LoopState, stop: StopInput, sources: Aggregate) -> bool:
    """Should the driver run the verification commands before `decide`? Only when the decision
    could complete the loop: never on a quoted promise, never with work still open."""
    if not state.verify or sources.uncertain or sources.pending_total:
        return False
    if signalled(state, stop.last_text) is not None:
        return True
    return state.verification_mode and state.verification_remaining <= 0


def signalled(state: LoopState, text: str | None) -> str | None:
    """The completion signal in the agent's own words, if any: what it says, minus anything it
    quotes from the prompt it was given."""
    return completion_signal(text, state.promise, echoed=f"{state.prompt}\n{finish_line(state)}")


# --- the Stop --------------------------------------------------------------------------------


def decide(
    state: LoopState | None,
    stop: StopInput,
    commands: list[Command],
    sources: Aggregate | None,
    now: datetime,
) -> Result:
    """Decide one Stop (or the end of one runner turn). `sources` may be None only when
    `needs_sources` said so."""
    if state is None or not ours(state, stop):
        return Result("allow", None)
    if stop.unconfirmed and stop.driver == "hook":
        return _unconfirmed(stop)

    state = state.copy()
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
    if stop.driver == "hook" and stop.session_pid and state.pid != stop.session_pid:
        state.pid = stop.session_pid  # the session that drives it: resumption sees it close
    if state.status == "initializing":
        state.status = "running"
    if not stop.stop_hook_active or stop.tool_round:
        state.consecutive_blocks = 0  # Claude Code's own count restarts here too
    if stop.transcript_size is not None:
        state.extra["transcript_seen"] = stop.transcript_size
    if stop.ralph_active and not state.extra.get("ralph_warned"):
        state.extra["ralph_warned"] = True
        events.append(("warning", {"message": RALPH_WARNING}))

    if stop.turn is not None:
        _notes_heard(state, stop.turn)
    forced: Command | None = None
    for command in commands:
        if _refused(result, command):
            continue
        outcome = _apply(state, command, sources, result, now)
        result.applied.append((command, outcome))
        if command.kind == "complete" and forced is None and outcome == "completion forced":
            forced = command
    if result.effects.skip_tasks and sources is not None:
        sources = _after_skip(sources, result.effects.skip_tasks)

    if forced is not None:
        return _complete(result, state, now, "forced by user", sources, forced.reason)
    if state.status == "stopped":
        events.append(("stopped", {"reason": "stop command"}))
        events.append(("allowed", {"reason": "loop stopped"}))
        summary = ending_summary("stopped", "stopped by a person", state, sources, now)
        result.effects = replace(result.effects, summary=summary)
        return result
    if state.status == "paused":
        events.append(("allowed", {"reason": "loop paused"}))
        result.system_message = f"loopdeck: loop paused at iteration {iteration_of(state)} (loopdeck resume)"
        return result
    if stop.unconfirmed:
        # A runner driving a loop whose file changed under it: nothing more runs until a
        # person confirms what it names now.
        listed = unconfirmed_line(stop.unconfirmed)
        reason = f"the loop names things nobody on this machine confirmed: {listed}"
        events.append(("escalation", {"kind": "unconfirmed", "reason": reason}))
        _wait(state, result, now, "escalation", reason, escalation="unconfirmed")
        return result

    settled = state.copy()
    settled_events = list(events)
    ruled = _rules(result, state, stop, sources, now)
    cap = stop.block_cap
    if ruled.blocked and cap and settled.consecutive_blocks >= cap:
        # Claude Code overrides this block and ends the turn: the agent never sees it, so it
        # counts for nothing (no iteration, no review loop); the next prompt decides afresh.
        message = (
            f"Claude Code's cap of {cap} blocks in a row ended this turn; say 'continue' to go on "
            "(CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0 lifts the cap: loopdeck install sets it)"
        )
        return Result(
            "allow",
            settled,
            system_message=f"loopdeck: {message}",
            events=[*settled_events, ("allowed", {"reason": message})],
            applied=result.applied,
            effects=result.effects,
        )
    return ruled


UNCONFIRMED_SHOWN = 4
"""How many unconfirmed values a one-line message names before it says how many more."""


def unconfirmed_line(listed: tuple[str, ...] | list[str]) -> str:
    """The unconfirmed values, shortened for one line."""
    shown = "; ".join(item[:120] for item in listed[:UNCONFIRMED_SHOWN])
    more = len(listed) - UNCONFIRMED_SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")


def _unconfirmed(stop: StopInput) -> Result:
    """A loop naming what no person here confirmed is data, not a loop to drive: the hook
    neither adopts the session nor sends the prompt nor applies a command. The stop is allowed,
    nothing is written, and the person (never the agent) reads one line."""
    message = (
        "loopdeck: this folder's loop names things nobody on this machine confirmed "
        f"({unconfirmed_line(stop.unconfirmed)}); nothing of it runs and its prompt is not sent. "
        "To run it, review and confirm it from a terminal outside this session: loopdeck trust"
    )
    return Result("allow", None, system_message=message)


def _rules(
    result: Result, state: LoopState, stop: StopInput, sources: Aggregate | None, now: datetime
) -> Result:
    """The loop's rules, once the commands are applied and the loop is neither paused nor
    stopped: the turn's facts, the sources, the signal, the review loops."""
    events = result.events
    turn = stop.turn
    waiting = state.waiting_for or {}
    if waiting.get("kind") == "usage-limit":
        until = parse_iso(str(waiting.get("until", "")))
        if stop.driver == "runner" and turn is None and until is not None and now < until:
            return result  # still waiting for the limit to reset (a command woke the runner)
        state.waiting_for = None
        events.append(("limit-lifted", {"was": waiting.get("reason", "")}))
    if turn is not None and turn.limited is None and turn.failure is None:
        state.stuck.pop("limit_waits", None)  # a turn that worked: the next limit waits briefly again
    if turn is not None and turn.usage:
        for key, value in turn.usage.items():
            state.usage[key] = state.usage.get(key, 0) + int(value)
    if turn is not None and turn.limited is not None:
        return _limited(result, state, turn, now)
    asked = question(stop.last_text) if turn is None or turn.interrupted is None else None
    if asked is not None and asked != state.extra.get("last_question"):
        # The agent asks a person something: the loop waits for the answer (the hook may wait
        # for it within the Stop; the answer goes into the next prompt either way).
        state.extra["last_question"] = asked
        events.append(("question", {"question": asked}))
        _wait(state, result, now, "question", f"the agent asks: {asked}", question=asked)
        return result
    if turn is not None and turn.denied:
        tools = ", ".join(turn.denied)
        events.append(("permission-denied", {"tools": list(turn.denied)}))
        reason = f"the agent was not allowed to use {tools}" + (
            f"; {turn.denied_hint}" if turn.denied_hint else ""
        )
        events.append(("escalation", {"kind": "permission-denied", "reason": reason}))
        _wait(state, result, now, "escalation", reason, escalation="permission-denied")
        return result
    if turn is not None and turn.unresolved:
        files = ", ".join(turn.unresolved[:10])
        reason = f"a merge is left unresolved in {files}: nothing was committed; resolve it, then resume"
        events.append(
            ("escalation", {"kind": "unresolved-merge", "reason": reason, "files": list(turn.unresolved)})
        )
        _wait(state, result, now, "escalation", reason, escalation="unresolved-merge")
        return result
    if turn is not None and turn.interrupted is None:
        if turn.failure is not None:
            task = state.current_task or "(no task)"
            stuck = state.stuck
            stuck["task_failures"] = stuck.get("task_failures", 0) + 1 if stuck.get("task") == task else 1
            stuck["task"] = task
            if _same_error(state, turn.error or turn.failure):
                return _stuck(result, state, now, _same_error_reason(state))
            if stuck["task_failures"] >= state.limit("same_task_after"):
                reason = f"task {task!r} failed {stuck['task_failures']} times"
                return _stuck(result, state, now, reason, kind="repeated-failures")
        elif stop.verification_failure is not None and _same_error(state, turn.error):
            return _stuck(result, state, now, _same_error_reason(state))
        elif stop.verification_failure is None:
            state.stuck.pop("error", None)
            state.stuck.pop("errors", None)

    if sources is None:
        raise ValueError("decide() needs the task sources here (ask needs_sources first)")
    vanished = _integrity(state, sources)
    if vanished is not None:
        # Open tasks left the task file without being done or skipped (an agent killed
        # mid-write, or one that emptied it): never read as "all done". A person decides; once
        # they resume, the file as it is now is the new count (recorded just now).
        events.append(("escalation", {"kind": "tasks-vanished", "reason": vanished}))
        _wait(state, result, now, "escalation", vanished, escalation="tasks-vanished")
        return result
    aggregate = sources

    if turn is not None and turn.failure is None and turn.interrupted is None:
        tasks = _task_mark(aggregate)
        same = _no_task_progress(state, tasks)
        if same and turn.changed is None:
            raise ValueError("decide() needs to know whether the workspace changed (ask needs_look first)")
        same = same and not turn.changed
        state.stuck["no_progress"] = state.stuck.get("no_progress", 0) + 1 if same else 0
        _count_tasks(state, tasks)
        if state.stuck["no_progress"] >= state.limit("stuck_after"):
            reason = (
                f"no progress in {state.stuck['no_progress']} iterations (no change in the "
                "workspace, no task change)"
            )
            return _stuck(result, state, now, reason)
    elif stop.driver == "runner" and "tasks" not in state.stuck:
        _count_tasks(state, _task_mark(aggregate))  # the first turn's baseline

    if aggregate.uncertain and not state.extra.get("uncertain_escalated"):
        # Once per stretch of unreadable sources: a person should know the loop is guessing.
        state.extra["uncertain_escalated"] = True
        names = ", ".join(f"{SOURCE_LABELS.get(r.name, r.name)} ({r.error})" for r in aggregate.unavailable)
        reason = f"cannot read {names}"
        events.append(("escalation", {"kind": "uncertain-sources", "reason": reason}))
        if stop.driver == "runner":
            _wait(state, result, now, "escalation", reason, escalation="uncertain-sources")
            return result
    elif not aggregate.uncertain:
        state.extra.pop("uncertain_escalated", None)

    if stop.driver == "runner" and state.iteration == 0 and not aggregate.uncertain and turn is None:
        # The runner's first turn is the loop's own prompt: the agent has not worked yet, so an
        # empty task list means "start", not "verify".
        prompt = first_prompt(state, aggregate)
        return _block(
            result, state, stop, prompt, "Orchestrator iteration {of} | first turn", aggregate, "work", now
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
            now,
        )
    if aggregate.uncertain:
        names = ", ".join(SOURCE_LABELS.get(r.name, r.name) for r in aggregate.unavailable)
        if state.stuck.get("mode") == "uncertain" and signalled(state, stop.last_text) is not None:
            # The agent was told to check the unreadable source itself and says all is done: a
            # claim nobody can check. Sending it back would loop forever (only a person could end
            # it), completing would trust it blindly: a person decides.
            reason = (
                f"the agent says every task is done, but {names} cannot be read to check it: make it "
                "readable and resume, or force completion"
            )
            events.append(("escalation", {"kind": "uncertain-sources", "reason": reason}))
            _wait(state, result, now, "escalation", reason, escalation="uncertain-sources")
            return result
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
            now,
        )

    signal = signalled(state, stop.last_text)
    if aggregate.pending_total > 0:
        if state.verification_mode:
            _leave_verification(state, events, "new task(s) appeared")
        n = len(aggregate.with_pending)
        plural = "s" if aggregate.pending_total != 1 else ""
        message = (
            f"Orchestrator iteration {{of}} | {aggregate.pending_total} pending task{plural} "
            f"across {n} source{'s' if n != 1 else ''}"
        )
        if signal is not None:
            # A signal is a claim: with work open in a readable source, it is not done.
            events.append(
                (
                    "warning",
                    {
                        "message": f"the agent signalled completion with {aggregate.pending_total} "
                        "task(s) still open; sent back to them"
                    },
                )
            )
            return _block(
                result,
                state,
                stop,
                claimed_prompt(state, aggregate),
                message + " | completion claimed with tasks open",
                aggregate,
                "work",
                now,
            )
        return _block(
            result, state, stop, continuation_prompt(state, aggregate), message, aggregate, "work", now
        )

    if signal is not None:
        return _finish_verified(result, state, stop, now, f"{signal} signalled by the agent", aggregate)

    # Nothing pending: the verification loops before the exit.
    if not state.verification_mode:
        state.verification_mode = True
        state.verification_remaining = state.verify_loops
        events.append(("verification-mode", {"loops": state.verify_loops}))
    if state.verification_remaining <= 0:
        return _finish_verified(result, state, stop, now, "all sources empty and verified", aggregate)
    number = state.verify_loops - state.verification_remaining + 1
    state.verification_remaining -= 1
    events.append(("verification-loop", {"loop": number, "of": state.verify_loops}))
    message = f"Orchestrator iteration {{of}} | verification loop {number} of {state.verify_loops}"
    return _block(
        result, state, stop, verification_prompt(state, number), message, aggregate, "verification", now
    )


def _finish_verified(
    result: Result, state: LoopState, stop: StopInput, now: datetime, reason: str, sources: Aggregate
) -> Result:
    """Complete, unless verification commands are configured and have not passed: no loop
    ever completes red."""
    if state.verify and not stop.verified:
        return _block(
            result,
            state,
            stop,
            unverified_prompt(state),
            "Orchestrator iteration {of} | verification commands must pass first",
            sources,
            "verification",
            now,
        )
    return _complete(result, state, now, reason, sources)


# --- parallel workers ------------------------------------------------------------------------
#
# The parallel driver keeps many agents busy at once. Which task a worker takes, who holds which
# file, when a task is redone or its worker replaced: the scheduler's rules (loop/scheduler.py).
# Everything about the loop itself is decided here, as for the other drivers: how many turns
# may start (an iteration is a worker turn), what a turn's facts mean for the loop (cost, usage
# limits, refused tools, the same error repeating), the commands, escalations and the ending.


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
    waiting = state.waiting_for or {}
    if waiting.get("kind") == "usage-limit":
        until = parse_iso(str(waiting.get("until", "")))
        if until is not None and now < until:
            return 0, result
        state.waiting_for = None
        result.events.append(("limit-lifted", {"was": waiting.get("reason", "")}))
    budget = state.limits.get("max_cost_micro_usd")
    spent = state.usage.get("cost_micro_usd", 0)
    if budget and spent >= budget:
        reason = f"cost ${spent / 1e6:.2f} reached the budget of ${budget / 1e6:.2f}"
        result.events.append(("escalation", {"kind": "max-cost", "reason": reason}))
        _wait(state, result, now, "escalation", reason, escalation="max-cost")
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
                _wait(state, result, now, "escalation", reason, escalation="max-iterations")
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
    if turn.usage:
        for key, value in turn.usage.items():
            state.usage[key] = state.usage.get(key, 0) + int(value)
    if turn.limited is not None:
        state.iteration = max(0, state.iteration - 1)  # not a turn spent: it runs again after the reset
        _limited(result, state, turn, now)
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
        _wait(state, result, now, "escalation", reason, escalation="permission-denied")
        return "hold", result
    if turn.failure is not None:
        if _same_error(state, turn.error or turn.failure):
            reason = f"{_same_error_reason(state)} (workers' turns, last: {worker} on task {task})"
            return "hold", _stuck(result, state, now, reason)
        return "rework", result
    state.stuck.pop("error", None)
    state.stuck.pop("errors", None)
    verdict = "approve" if changed else "rework"
    budget = state.limits.get("max_cost_micro_usd")
    if budget and state.usage.get("cost_micro_usd", 0) >= budget:
        spent = state.usage.get("cost_micro_usd", 0)
        reason = f"cost ${spent / 1e6:.2f} reached the budget of ${budget / 1e6:.2f}"
        events.append(("escalation", {"kind": "max-cost", "reason": reason}))
        _wait(state, result, now, "escalation", reason, escalation="max-cost")
    return verdict, result


def escalate(state: LoopState, kind: str, reason: str, now: datetime, **data: Any) -> Result:
    """The loop needs a person (a deadlock of the task graph, a task no worker could move, a
    merge that keeps conflicting): it waits, saying why."""
    state = state.copy()
    result = Result("allow", state)
    if state.status != "running":
        return result
    result.events.append(("escalation", {"kind": kind, "reason": reason, **data}))
    _wait(state, result, now, "escalation", reason, escalation=kind)
    return result


def commands(state: LoopState, queued: list[Command], sources: Aggregate | None, now: datetime) -> Result:
    """A person's commands to a whole loop of workers, in order, as for the other drivers: a
    stop or a forced completion is final; pause, resume, answer, say and the limit mean what
    they mean everywhere."""
    state = state.copy()
    result = Result("allow", state)
    forced: Command | None = None
    for command in queued:
        if _refused(result, command):
            continue
        outcome = _apply(state, command, sources, result, now)
        result.applied.append((command, outcome))
        if command.kind == "complete" and forced is None and outcome == "completion forced":
            forced = command
    if forced is not None:
        return _complete(result, state, now, "forced by user", sources, forced.reason)
    if state.status == "stopped":
        result.events.append(("stopped", {"reason": "stop command"}))
        summary = ending_summary("stopped", "stopped by a person", state, sources, now)
        result.effects = replace(result.effects, summary=summary)
    return result


def finish(state: LoopState, reason: str, sources: Aggregate | None, now: datetime) -> Result:
    """Every task of the graph is done (merged into the loop's branch): the loop completes and
    is archived with the summary every driver's ending has."""
    state = state.copy()
    return _complete(Result("allow", state), state, now, reason, sources)


# --- the other events ------------------------------------------------------------------------


def configure(state: LoopState, settings: Settings, now: datetime) -> Result:
    """Options given to `run` or `start` for an existing loop, and a driver claiming it."""
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
        _set_max(state, settings.max_iterations)
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
        if settings.driver == "runner":
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
    return _limited(Result("allow", state), state, Turn(limited=reason, resets_at=resets_at), now)


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
        return _complete(result, state, now, "marked complete at resume", sources)
    was = state.waiting_for or {}
    if state.status in ("paused", "initializing"):
        state.status = "running"
    state.waiting_for = None
    state.stuck = {k: v for k, v in state.stuck.items() if k in ("tasks", "mode")}
    previous = state.pid
    state.pid = None
    if state.driver in (None, "hook") and previous is not None:
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


# --- rules -----------------------------------------------------------------------------------


def _wait(state: LoopState, result: Result, now: datetime, kind: str, reason: str, **more: Any) -> None:
    """Pause the loop until a person answers, saying why in the state."""
    state.status = "paused"
    state.waiting_for = {"kind": kind, "reason": reason, "since": iso_s(now), **more}
    result.events.append(("paused", {"reason": reason, "waiting_for": kind}))
    result.action = "allow"
    result.reason = None
    result.system_message = f"loopdeck: loop paused, waiting for a person ({reason})"


def _stuck(result: Result, state: LoopState, now: datetime, reason: str, kind: str = "stuck") -> Result:
    """The loop is going nowhere: say why and wait for a person (counters start over)."""
    result.events.append(("escalation", {"kind": kind, "reason": reason}))
    _wait(state, result, now, "escalation", reason, escalation=kind)
    state.stuck = {k: v for k, v in state.stuck.items() if k in ("tasks", "mode")}
    return result


def _same_error(state: LoopState, error: str | None) -> bool:
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


def _same_error_reason(state: LoopState) -> str:
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


def _limited(result: Result, state: LoopState, turn: Turn, now: datetime) -> Result:
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


def _integrity(state: LoopState, sources: Aggregate) -> str | None:
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


def _task_mark(sources: Aggregate) -> str:
    return ";".join(f"{r.name}:{r.pending}/{r.in_progress}/{r.done}" for r in sources.sources)


def _no_task_progress(state: LoopState, tasks: str) -> bool:
    """A working turn (not a review or verification turn) that left the task counts as they
    were: only the workspace can still show progress."""
    return state.stuck.get("mode", "work") == "work" and state.stuck.get("tasks") == tasks


def _count_tasks(state: LoopState, tasks: str) -> None:
    """Record the task counts the next turn is judged against. A state written before the
    workspace was compared within a turn kept a combined `mark`: it goes (its turn counts as
    progress once)."""
    state.stuck["tasks"] = tasks
    state.stuck.pop("mark", None)


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
    now: datetime,
) -> Result:
    events = result.events
    budget = state.limits.get("max_cost_micro_usd")
    spent = state.usage.get("cost_micro_usd", 0)
    if budget and spent >= budget and stop.driver == "runner":
        # The budget is spent: the agent is not started again until a person raises it.
        reason = f"cost ${spent / 1e6:.2f} reached the budget of ${budget / 1e6:.2f}"
        events.append(("escalation", {"kind": "max-cost", "reason": reason}))
        _wait(state, result, now, "escalation", reason, escalation="max-cost")
        return result
    block_cap = stop.block_cap
    over = state.max_iterations > 0 and state.iteration + 1 > state.max_iterations
    # The hook escalates once, then keeps blocking with the escalation prompt (the session's
    # person reads it); the runner never starts a turn past the limit, whoever resumed it.
    if over and mode in ("work", "uncertain") and (not state.escalated or stop.driver == "runner"):
        state.escalated = True
        reason = f"{state.max_iterations} iterations reached with {sources.pending_total} task(s) pending"
        events.append(
            (
                "escalation",
                {
                    "reason": reason,
                    "kind": "max-iterations",
                    "max_iterations": state.max_iterations,
                    "pending_total": sources.pending_total,
                },
            )
        )
        if stop.driver == "runner":
            # Nobody is inside the session to read an escalation prompt: the runner waits.
            state.current_task = _current_task(sources)
            _wait(state, result, now, "escalation", reason, escalation="max-iterations")
            return result
    state.iteration += 1
    state.consecutive_blocks += 1
    state.stuck["mode"] = mode
    if over and mode in ("work", "uncertain"):
        prompt = escalation_prompt(state, sources)
        message += f" | ESCALATION: past {state.max_iterations} iterations"
    answer = state.extra.pop("answer", None)
    asked = state.extra.pop("answered", None)
    notes = _notes_for(state, stop)
    if notes:
        said = "\n".join(f"- {note}" for note in notes)
        prompt = cap(f"A PERSON WATCHING THE LOOP SAYS:\n{said}\n\n{prompt}")
    if answer is not None:
        # answered, the same words asked again in a later turn are a new question
        state.extra.pop("last_question", None)
    if answer:
        prompt = cap(f"{answered_prompt(answer, asked)}\n\n{prompt}")
    if stop.turn is not None and stop.turn.refused:
        prompt = cap(f"{stop.turn.refused}\n\n{prompt}")  # one line: what the sandbox refused
    text = message.replace("{of}", iteration_of(state))
    if stop.ralph_active:
        text += " | WARNING: ralph-loop is active too"
    if block_cap and state.consecutive_blocks == block_cap:
        warning = (
            f"block {state.consecutive_blocks} of Claude Code's cap of {block_cap}: it will end the turn "
            "at the next Stop; set CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0 (loopdeck install does) and say "
            "'continue'"
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


def _notes_for(state: LoopState, stop: StopInput) -> list[str]:
    """The person's notes for this prompt. The hook's block reaches the session at once, so
    its notes are spent; a runner turn can be cut short (a skip a second later), so the runner
    keeps them, and how many were sent, until a turn that got them runs to its end."""
    if stop.driver == "hook":
        return list(state.extra.pop("notes", None) or [])
    notes = list(state.extra.get("notes") or [])
    if notes:
        state.extra["notes_sent"] = len(notes)
    return notes


def _notes_heard(state: LoopState, turn: Turn) -> None:
    """A runner turn ended: the notes its prompt carried are spent if the agent worked the turn
    through; after a turn cut short, failed or held by a usage limit they go out again."""
    if turn.interrupted is not None or turn.failure is not None or turn.limited is not None:
        return
    sent = int(state.extra.pop("notes_sent", 0) or 0)
    rest = list(state.extra.get("notes") or [])[sent:]
    if rest:
        state.extra["notes"] = rest
    else:
        state.extra.pop("notes", None)


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


def _after_skip(aggregate: Aggregate, times: int) -> Aggregate:
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


def _set_max(state: LoopState, value: int) -> None:
    """A new limit re-arms the escalation when it lies ahead (or is lifted)."""
    state.max_iterations = value
    if state.escalated and (value == 0 or value > state.iteration):
        state.escalated = False
        if state.waiting_for and state.waiting_for.get("escalation") == "max-iterations":
            state.waiting_for = None
            if state.status == "paused":
                state.status = "running"


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


def _refused(result: Result, command: Command) -> bool:
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
    _refused(result, command)
    return result


ANSWER_KEEPS_WAITING = ("pause", "usage-limit")
"""What an answer does not lift: a person's pause (only their resume does) and a usage limit's
wait (its reset does). An answer lifts what asked a person: a question, an escalation."""


def _apply(
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
        _set_max(state, command.value)
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
        report = _after_skip(sources, result.effects.skip_tasks).by_name("task_file")
        if report is None or not report.available or not report.open_count:
            return "nothing to skip: the task file has no pending task"
        result.effects = replace(result.effects, skip_tasks=result.effects.skip_tasks + 1)
        return "skipping the current task-file task"
    return f"unknown command {kind}"  # pragma: no cover - the queue refuses them

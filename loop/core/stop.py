"""The Stop: the hook's Stop, or the end of one agent turn the runner started.

The flow at each Stop:

1. no loop, another session's Stop, or a loop that has ended → allow, untouched;
2. apply the control commands, in order; a stop or a forced completion is final;
3. stopped or paused → allow; forced completion → archive, allow;
4. (a driver that starts the agent) the turn: a question pauses; a failure, the same error or
   no progress counted, and past their thresholds the loop escalates (waits for a person);
5. count the sources: unreadable → conservative block (a completion claimed after it → a
   person decides); a completion signal is a claim, checked against the sources and the
   verification commands; pending work → block with the continuation prompt (escalation past
   max_iterations); nothing pending → verification loops, then (verified) archive and allow.

Where the drivers' situations differ, the driver's `DriverPolicy` says how, never its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import replace as evolve
from datetime import datetime
from typing import Any

from loop.core import progress
from loop.core.commands import apply_all, refusal, replayed
from loop.core.model import SOURCE_LABELS, Aggregate, Command, LoopState, Result, StopInput, Turn, replace
from loop.core.policy import DriverPolicy, named
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
    verification_prompt,
)
from loop.core.signals import completion_signal, question
from loop.core.transitions import (
    add_usage,
    after_skip,
    budget_wait,
    complete,
    count_tasks,
    current_task,
    ending_summary,
    escalate_unconfirmed,
    escalation,
    integrity,
    leave_verification,
    lift_limit,
    limit_holds,
    limit_wait,
    no_task_progress,
    over_budget,
    same_error,
    same_error_reason,
    stuck_wait,
    task_mark,
    unconfirmed_line,
    wait,
)

RALPH_WARNING = (
    "WARNING: Both orchestrator-loop AND ralph-loop are active simultaneously! "
    "This may cause conflicts. Consider using only one at a time."
)


@dataclass(frozen=True, slots=True)
class _Ask:
    """One decision's facts: what the driver saw, how the driver stands to the loop, when."""

    stop: StopInput
    policy: DriverPolicy
    now: datetime
    moved: tuple[str, ...] = ()
    """How the tests moved since the last validation (`progress.test_moves`)."""
    on_tests: bool = False
    """The turn is judged on the tests (and the tasks), not on the workspace changing."""


# --- asking first --------------------------------------------------------------------------


def ours(state: LoopState | None, stop: StopInput) -> bool:
    """Is this Stop the loop's business at all (a live loop, this session's)?"""
    if state is None or not state.active:
        return False
    return not (stop.session_id and state.session_id and stop.session_id != state.session_id)


def needs_sources(
    state: LoopState | None, stop: StopInput, commands: list[Command], policy: DriverPolicy | None = None
) -> bool:
    """Will `decide` look at the task sources? False when a pause or stop settles the Stop.
    `policy` is the driver's (by default, the one `stop.driver` names)."""
    policy = policy or named(stop.driver)
    if not ours(state, stop) or (stop.unconfirmed and policy.in_session):
        return False
    assert state is not None
    interim, scratch = replayed(state, commands, None)
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
        state, scratch = replayed(state, commands, sources)
        if scratch.effects.skip_tasks:
            sources = after_skip(sources, scratch.effects.skip_tasks)
    return no_task_progress(state, task_mark(sources))


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
    policy: DriverPolicy | None = None,
) -> Result:
    """Decide one Stop (or the end of one runner turn). `sources` may be None only when
    `needs_sources` said so; `policy` is the driver's (by default, the one `stop.driver` names)."""
    ask = _Ask(stop, policy or named(stop.driver), now)
    if state is None or not ours(state, stop):
        return Result("allow", None)
    if stop.unconfirmed and ask.policy.in_session:
        return _unconfirmed(stop)

    state = state.copy()
    result = Result("allow", state)
    events = result.events
    _take_stop(state, result, ask)
    forced = apply_all(state, result, commands, sources, now)
    if result.effects.skip_tasks and sources is not None:
        sources = after_skip(sources, result.effects.skip_tasks)

    if forced is not None:
        return complete(result, state, now, "forced by user", sources, forced.reason)
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
        # A driver outside the session, driving a loop whose file changed under it.
        escalate_unconfirmed(state, result, stop.unconfirmed, now)
        return result
    if stop.design_changed:
        # The design is the loop's contract, locked while it runs: nobody rewrites it mid-loop.
        reason = (
            f"the design {stop.design_changed} changed while the loop ran; put it back as it was and "
            "resume, or start a new loop from it (loopdeck start --force --design)"
        )
        return escalation(state, result, now, "design-changed", reason, design=stop.design_changed)

    settled = state.copy()
    settled_events = list(events)
    ruled = _rules(result, state, ask, sources)
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


def _take_stop(state: LoopState, result: Result, ask: _Ask) -> None:
    """What the Stop itself tells the state, before any command: the session (in a session, the
    loop is bound to it and its process), the transcript, the driver, Claude Code's block count."""
    stop, policy = ask.stop, ask.policy
    if stop.session_id and not state.session_id and policy.in_session:
        state.session_id = stop.session_id
        result.events.append(("session-bound", {"session_id": stop.session_id}))
    if stop.transcript_path and stop.transcript_path != state.transcript_path:
        state.transcript_path = stop.transcript_path
    if policy.in_session and not named(state.driver).in_session:
        state.pid = None  # the process of the driver it takes the loop over from says nothing now
    state.driver = stop.driver  # who drives it, for people to read
    if policy.in_session and stop.session_pid and state.pid != stop.session_pid:
        state.pid = stop.session_pid  # the session that drives it: resumption sees it close
    if state.status == "initializing":
        state.status = "running"
    if not stop.stop_hook_active or stop.tool_round:
        state.consecutive_blocks = 0  # Claude Code's own count restarts here too
    if stop.transcript_size is not None:
        state.extra["transcript_seen"] = stop.transcript_size
    if stop.ralph_active and not state.extra.get("ralph_warned"):
        state.extra["ralph_warned"] = True
        result.events.append(("warning", {"message": RALPH_WARNING}))
    if stop.turn is not None:
        _notes_heard(state, stop.turn)


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


def _rules(result: Result, state: LoopState, ask: _Ask, sources: Aggregate | None) -> Result:
    """The loop's rules, once the commands are applied and the loop is neither paused nor
    stopped, with the turn's progress judged on the checks' results: the last validation is
    recorded, and a judged turn journals one `progress` event (before what it led to)."""
    at, tasks_before = len(result.events), state.stuck.get("tasks")
    validation = ask.stop.validation
    ask = evolve(
        ask,
        moved=tuple(progress.test_moves(state.last_validation, validation)),
        on_tests=progress.judged_on_tests(state.last_validation, validation),
    )
    if validation is not None:
        state.last_validation = progress.record(validation, state.last_validation)
    ruled = _ruled(result, state, ask, sources)
    if sources is not None and _judged(ask):
        tasks = task_mark(sources)
        moved = ["tasks"] if tasks_before is not None and tasks_before != tasks else []
        if not ask.policy.starts_agent:
            count_tasks(state, tasks)  # in a session every Stop is a turn: the next one's baseline
        files = ask.stop.turn.files if ask.stop.turn is not None else None
        data = progress.event(sources, validation, files, [*moved, *ask.moved])
        result.events.insert(at, ("progress", data))
    return ruled


def _judged(ask: _Ask) -> bool:
    """Is this decision's turn judged for progress? A turn the agent worked through (not failed,
    cut short or held by a usage limit); in a session, every Stop."""
    turn = ask.stop.turn
    if turn is None:  # a driver's first decision is judged when it checked the starting point
        return not ask.policy.starts_agent or ask.stop.validation is not None
    return turn.failure is None and turn.interrupted is None and turn.limited is None


def _ruled(result: Result, state: LoopState, ask: _Ask, sources: Aggregate | None) -> Result:
    """The turn's facts, the sources, the signal, the review loops."""
    held = _turn_facts(result, state, ask)
    if held is not None:
        return held
    if sources is None:
        raise ValueError("decide() needs the task sources here (ask needs_sources first)")
    vanished = integrity(state, sources)
    if vanished is not None:
        # Open tasks left the task file without being done or skipped (an agent killed
        # mid-write, or one that emptied it): never read as "all done". A person decides; once
        # they resume, the file as it is now is the new count (recorded just now).
        return escalation(state, result, ask.now, "tasks-vanished", vanished)
    held = _progress(result, state, ask, sources)
    if held is not None:
        return held
    stop = ask.stop
    if ask.policy.starts_agent and state.iteration == 0 and not sources.uncertain and stop.turn is None:
        # The driver's first turn is the loop's own prompt: the agent has not worked yet, so an
        # empty task list means "start", not "verify".
        prompt = first_prompt(state, sources)
        return _block(result, state, ask, prompt, "Orchestrator iteration {of} | first turn", sources, "work")
    if stop.verification_failure is not None:
        if state.verification_mode:
            leave_verification(state, result.events, "verification commands failed")
        return _block(
            result,
            state,
            ask,
            failure_prompt(state, stop.verification_failure, sources, stop.validation),
            "Orchestrator iteration {of} | VERIFICATION FAILED: fix it before anything else"
            + _tests_said(stop.validation),
            sources,
            "work",
        )
    if sources.uncertain:
        return _uncertain(result, state, ask, sources)
    if sources.pending_total > 0:
        return _pending(result, state, ask, sources)
    signal = signalled(state, stop.last_text)
    if signal is not None:
        return _finish_verified(result, state, ask, f"{signal} signalled by the agent", sources)
    return _verification_loop(result, state, ask, sources)


def _turn_facts(result: Result, state: LoopState, ask: _Ask) -> Result | None:
    """What the turn that ended says before any task is counted: a usage limit (waited out, or
    still holding a driver woken by a command), the agent's question, refused tools, a merge
    left unresolved, failures. The Result when it settles the Stop, else None."""
    turn, now = ask.stop.turn, ask.now
    if state.waiting_kind == "usage-limit":
        if ask.policy.starts_agent and turn is None and limit_holds(state, now):
            return result  # still waiting for the limit to reset (a command woke the driver)
        lift_limit(state, result)
    if turn is not None and turn.limited is None and turn.failure is None:
        state.stuck.pop("limit_waits", None)  # a turn that worked: the next limit waits briefly again
    add_usage(state, turn)
    if turn is not None and turn.limited is not None:
        return limit_wait(result, state, turn, now)
    asked = question(ask.stop.last_text) if turn is None or turn.interrupted is None else None
    if asked is not None and asked != state.extra.get("last_question"):
        # The agent asks a person something: the loop waits for the answer (the hook may wait
        # for it within the Stop; the answer goes into the next prompt either way).
        state.extra["last_question"] = asked
        result.events.append(("question", {"question": asked}))
        wait(state, result, now, "question", f"the agent asks: {asked}", question=asked)
        return result
    if turn is None:
        return None
    if turn.denied:
        tools = ", ".join(turn.denied)
        result.events.append(("permission-denied", {"tools": list(turn.denied)}))
        reason = f"the agent was not allowed to use {tools}" + (
            f"; {turn.denied_hint}" if turn.denied_hint else ""
        )
        return escalation(state, result, now, "permission-denied", reason)
    if turn.unresolved:
        files = ", ".join(turn.unresolved[:10])
        reason = f"a merge is left unresolved in {files}: nothing was committed; resolve it, then resume"
        return escalation(state, result, now, "unresolved-merge", reason, files=list(turn.unresolved))
    if turn.interrupted is None:
        return _failures(result, state, ask, turn)
    return None


def _failures(result: Result, state: LoopState, ask: _Ask, turn: Turn) -> Result | None:
    """A failed turn counts against its task and its error; the same error repeated, or one
    task failing too often, escalates as stuck."""
    now, failed_checks = ask.now, ask.stop.verification_failure
    if turn.failure is not None:
        task = state.current_task or "(no task)"
        stuck = state.stuck
        stuck["task_failures"] = stuck.get("task_failures", 0) + 1 if stuck.get("task") == task else 1
        stuck["task"] = task
        if same_error(state, turn.error or turn.failure):
            return stuck_wait(result, state, now, same_error_reason(state))
        if stuck["task_failures"] >= state.limit("same_task_after"):
            reason = f"task {task!r} failed {stuck['task_failures']} times"
            return stuck_wait(result, state, now, reason, kind="repeated-failures")
    elif failed_checks is not None and "fewer-failing" in ask.moved:
        # Fewer tests fail: not the same error, whatever it says. Tests added beside the same
        # failures are not that: the same error still counts (a new error starts it over).
        state.stuck.pop("error", None)
        state.stuck.pop("errors", None)
    elif failed_checks is not None:
        signature = progress.error_signature(ask.stop.validation)
        if same_error(state, signature or turn.error):
            return stuck_wait(result, state, now, _same_error_why(state, ask))
    elif failed_checks is None:
        state.stuck.pop("error", None)
        state.stuck.pop("errors", None)
    return None


def _same_error_why(state: LoopState, ask: _Ask) -> str:
    """Why the same error escalates: the rule, and the failing tests when they are known."""
    reason = same_error_reason(state)
    tests = progress.tests_of(ask.stop.validation)
    names = progress.failing_names(tests, 3) if tests is not None else ""
    return f"{reason} ({names} failing)" if names else reason


def _progress(result: Result, state: LoopState, ask: _Ask, sources: Aggregate) -> Result | None:
    """Did the turn move anything (the task counts, the tests, else the workspace)? No progress
    too often escalates as stuck. While tests fail and their counts are known, only the tasks
    and the tests count: a workspace that changes without a test getting better is no progress.
    Unreadable sources escalate once per stretch: a driver that waits for a person waits; in a
    session the loop goes on, conservatively."""
    turn = ask.stop.turn
    if turn is not None and turn.failure is None and turn.interrupted is None:
        tasks = task_mark(sources)
        same = no_task_progress(state, tasks) and not ask.moved
        if same and not ask.on_tests:
            if turn.changed is None:
                raise ValueError(
                    "decide() needs to know whether the workspace changed (ask needs_look first)"
                )
            same = not turn.changed
        state.stuck["no_progress"] = state.stuck.get("no_progress", 0) + 1 if same else 0
        count_tasks(state, tasks)
        if state.stuck["no_progress"] >= state.limit("stuck_after"):
            what = (
                "no task change, no test got better"
                if ask.on_tests
                else ("no change in the workspace, no task change")
            )
            reason = f"no progress in {state.stuck['no_progress']} iterations ({what})"
            return stuck_wait(result, state, ask.now, reason)
    elif ask.policy.starts_agent and "tasks" not in state.stuck:
        count_tasks(state, task_mark(sources))  # the first turn's baseline

    if sources.uncertain and not state.extra.get("uncertain_escalated"):
        # Once per stretch of unreadable sources: a person should know the loop is guessing.
        state.extra["uncertain_escalated"] = True
        names = ", ".join(f"{SOURCE_LABELS.get(r.name, r.name)} ({r.error})" for r in sources.unavailable)
        reason = f"cannot read {names}"
        if ask.policy.waits_for_person:
            return escalation(state, result, ask.now, "uncertain-sources", reason)
        result.events.append(("escalation", {"kind": "uncertain-sources", "reason": reason}))
    elif not sources.uncertain:
        state.extra.pop("uncertain_escalated", None)
    return None


def _tests_said(validation: Mapping[str, Any] | None) -> str:
    """` | tests: 7 passed, 3 failed` when the checks' test counts are known."""
    tests = progress.tests_of(validation)
    return f" | tests: {progress.tests_line(tests)}" if tests is not None else ""


def _uncertain(result: Result, state: LoopState, ask: _Ask, sources: Aggregate) -> Result:
    """A source cannot be read: the agent is sent back to check it itself; a completion it
    claims after that is for a person to judge."""
    names = ", ".join(SOURCE_LABELS.get(r.name, r.name) for r in sources.unavailable)
    if state.stuck.get("mode") == "uncertain" and signalled(state, ask.stop.last_text) is not None:
        # The agent was told to check the unreadable source itself and says all is done: a
        # claim nobody can check. Sending it back would loop forever (only a person could end
        # it), completing would trust it blindly: a person decides.
        reason = (
            f"the agent says every task is done, but {names} cannot be read to check it: make it "
            "readable and resume, or force completion"
        )
        return escalation(state, result, ask.now, "uncertain-sources", reason)
    if state.verification_mode:
        leave_verification(state, result.events, "a task source could not be read")
    return _block(
        result,
        state,
        ask,
        conservative_prompt(state, sources),
        f"Orchestrator iteration {{of}} | TASK CHECK FAILED: cannot read {names}",
        sources,
        "uncertain",
    )


def _pending(result: Result, state: LoopState, ask: _Ask, sources: Aggregate) -> Result:
    """Work is open: the agent goes on with it, whatever it claimed."""
    if state.verification_mode:
        leave_verification(state, result.events, "new task(s) appeared")
    n = len(sources.with_pending)
    plural = "s" if sources.pending_total != 1 else ""
    message = (
        f"Orchestrator iteration {{of}} | {sources.pending_total} pending task{plural} "
        f"across {n} source{'s' if n != 1 else ''}"
    )
    if signalled(state, ask.stop.last_text) is None:
        return _block(result, state, ask, continuation_prompt(state, sources), message, sources, "work")
    # A signal is a claim: with work open in a readable source, it is not done.
    warning = (
        f"the agent signalled completion with {sources.pending_total} task(s) still open; sent back to them"
    )
    result.events.append(("warning", {"message": warning}))
    message += " | completion claimed with tasks open"
    return _block(result, state, ask, claimed_prompt(state, sources), message, sources, "work")


def _verification_loop(result: Result, state: LoopState, ask: _Ask, sources: Aggregate) -> Result:
    """Nothing pending: the verification loops before the exit."""
    events = result.events
    if not state.verification_mode:
        state.verification_mode = True
        state.verification_remaining = state.verify_loops
        events.append(("verification-mode", {"loops": state.verify_loops}))
    if state.verification_remaining <= 0:
        return _finish_verified(result, state, ask, "all sources empty and verified", sources)
    number = state.verify_loops - state.verification_remaining + 1
    state.verification_remaining -= 1
    events.append(("verification-loop", {"loop": number, "of": state.verify_loops}))
    message = f"Orchestrator iteration {{of}} | verification loop {number} of {state.verify_loops}"
    return _block(result, state, ask, verification_prompt(state, number), message, sources, "verification")


def _finish_verified(result: Result, state: LoopState, ask: _Ask, reason: str, sources: Aggregate) -> Result:
    """Complete, unless verification commands are configured and have not passed: no loop
    ever completes red."""
    if state.verify and not ask.stop.verified:
        message = "Orchestrator iteration {of} | verification commands must pass first"
        return _block(result, state, ask, unverified_prompt(state), message, sources, "verification")
    return complete(result, state, ask.now, reason, sources)


# --- a block: the agent works on -------------------------------------------------------------


def _block(
    result: Result, state: LoopState, ask: _Ask, prompt: str, message: str, sources: Aggregate, mode: str
) -> Result:
    """The agent works on with `prompt`: one more iteration, unless the budget is spent or the
    iteration limit reached (an escalation); the person's answer and notes go first."""
    stop, policy, now = ask.stop, ask.policy, ask.now
    spent = over_budget(state) if policy.tracks_cost else None
    if spent is not None:
        return budget_wait(state, result, now, spent)  # the agent is not started again
    over = state.max_iterations > 0 and state.iteration + 1 > state.max_iterations
    # In a session, the loop escalates once, then keeps blocking with the escalation prompt (the
    # session's person reads it); a driver that waits for a person never starts a turn past the
    # limit, whoever resumed it.
    if over and mode in ("work", "uncertain") and (not state.escalated or policy.waits_for_person):
        state.escalated = True
        reason = f"{state.max_iterations} iterations reached with {sources.pending_total} task(s) pending"
        data = {"max_iterations": state.max_iterations, "pending_total": sources.pending_total}
        if policy.waits_for_person:
            state.current_task = current_task(sources)
            return escalation(state, result, now, "max-iterations", reason, **data)
        result.events.append(("escalation", {"reason": reason, "kind": "max-iterations", **data}))
    state.iteration += 1
    state.consecutive_blocks += 1
    state.stuck["mode"] = mode
    if over and mode in ("work", "uncertain"):
        prompt = escalation_prompt(state, sources)
        message += f" | ESCALATION: past {state.max_iterations} iterations"
    prompt = _with_person(state, ask, prompt)
    text = message.replace("{of}", iteration_of(state))
    if stop.ralph_active:
        text += " | WARNING: ralph-loop is active too"
    block_cap = stop.block_cap
    if block_cap and state.consecutive_blocks == block_cap:
        warning = (
            f"block {state.consecutive_blocks} of Claude Code's cap of {block_cap}: it will end the turn "
            "at the next Stop; set CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0 (loopdeck install does) and say "
            "'continue'"
        )
        text += f" | {warning}"
        result.events.append(("warning", {"message": warning}))
    state.current_task = current_task(sources)
    result.action = "block"
    result.reason = prompt
    result.system_message = text
    blocked = {"message": text, "mode": mode, "pending_total": sources.pending_total}
    result.events.append(("blocked", {**blocked, "max_iterations": state.max_iterations}))
    return result


def _with_person(state: LoopState, ask: _Ask, prompt: str) -> str:
    """The prompt with what a person said first: their notes, their answer, and what the
    sandbox refused the agent last turn."""
    answer = state.extra.pop("answer", None)
    asked = state.extra.pop("answered", None)
    notes = _notes_for(state, ask.policy)
    if notes:
        said = "\n".join(f"- {note}" for note in notes)
        prompt = cap(f"A PERSON WATCHING THE LOOP SAYS:\n{said}\n\n{prompt}")
    if answer is not None:
        # answered, the same words asked again in a later turn are a new question
        state.extra.pop("last_question", None)
    if answer:
        prompt = cap(f"{answered_prompt(answer, asked)}\n\n{prompt}")
    turn = ask.stop.turn
    if turn is not None and turn.refused:
        prompt = cap(f"{turn.refused}\n\n{prompt}")  # one line: what the sandbox refused
    return prompt


def _notes_for(state: LoopState, policy: DriverPolicy) -> list[str]:
    """The person's notes for this prompt. In a session the block reaches the agent at once, so
    its notes are spent; a turn a driver started can be cut short (a skip a second later), so
    that driver keeps them, and how many were sent, until a turn that got them runs to its end."""
    if policy.in_session:
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

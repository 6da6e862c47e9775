"""The rules the runner used to keep to itself, now the engine's: stuck detection, waiting for a
person, escalation at the limit, options, signals, restores, which queued command wins. Pure
functions on a fixed clock: no files, no processes."""

from __future__ import annotations

import pytest

from loop.core.engine import (
    configure,
    decide,
    interrupt,
    needs_look,
    needs_sources,
    restore,
    wants_verification,
)
from loop.core.model import Aggregate, Command, LoopState, Result, Settings, StopInput, Turn, combine, replace
from tests.test_engine import EMPTY, NOW, cmd, kinds, report, sources, state


def runner_stop(text: str | None = None, **kw: object) -> StopInput:
    return StopInput(last_text=text, driver="runner", **kw)  # type: ignore[arg-type]


def turn_end(
    s: LoopState, srcs: Aggregate, text: str | None = None, *commands: Command, **kw: object
) -> Result:
    """One runner turn ended: the engine decides what comes next."""
    return decide(s, runner_stop(text, **kw), list(commands), srcs, NOW)


def working(**values: object) -> LoopState:
    """A runner loop past its first turn, working on its task file."""
    return state(**{"iteration": 1, "driver": "runner", **values})


def chain(s: LoopState, srcs: Aggregate, turns: list[Turn], **kw: object) -> Result:
    result = Result("block", s)
    for turn in turns:
        assert result.state is not None and result.blocked, kinds(result)
        result = turn_end(result.state, srcs, "worked", turn=turn, **kw)
    return result


# --- stuck detection ---------------------------------------------------------------------------


def test_no_progress_in_two_working_turns_escalates_and_waits() -> None:
    srcs = sources(task_file=2)
    result = chain(working(), srcs, [Turn(changed=False), Turn(changed=False), Turn(changed=False)])
    assert result.action == "allow" and result.state is not None
    assert result.state.status == "paused"
    assert result.state.waiting_for == {
        "kind": "escalation",
        "escalation": "stuck",
        "reason": "no progress in 2 iterations (no change in the workspace, no task change)",
        "since": "2026-01-09T11:30:00+00:00",
    }
    assert "escalation" in kinds(result) and "paused" in kinds(result)


def test_changing_files_or_task_counts_are_progress() -> None:
    srcs = sources(task_file=2)
    result = chain(working(), srcs, [Turn(changed=True)] * 4)
    assert result.blocked
    # fewer tasks: progress, whatever the workspace shows (the runner did not look)
    fewer = turn_end(result.state, sources(task_file=1), "ticked one", turn=Turn())  # type: ignore[arg-type]
    assert fewer.blocked and fewer.state is not None and fewer.state.stuck["no_progress"] == 0


def test_the_workspace_is_asked_about_only_when_the_task_counts_did_not_change() -> None:
    """A working turn that changed a task count made progress whatever the workspace shows:
    the runner need not wait for git before the decision. One that changed no count is judged
    by the workspace, and deciding it without knowing is a driver's bug, not a guess."""
    srcs = sources(task_file=2)
    first = turn_end(working(), srcs, "worked", turn=Turn(changed=True))
    assert first.state is not None and first.blocked
    s = first.state
    assert needs_look(s, Turn(), [], srcs)
    assert not needs_look(s, Turn(), [], sources(task_file=1))
    for unjudged in (Turn(failure="exit 1"), Turn(interrupted="skip"), Turn(limited="limit"), None):
        assert not needs_look(s, unjudged, [], srcs)
    with pytest.raises(ValueError, match="needs_look"):
        turn_end(s, srcs, "worked", turn=Turn())
    fewer = turn_end(s, sources(task_file=1), "worked", turn=Turn())
    assert fewer.state is not None and fewer.state.stuck["no_progress"] == 0


def test_the_counts_asked_about_are_the_decisions_after_a_queued_skip() -> None:
    """The agent wrote down a new task (2 -> 3 open) and finished; a person's skip, queued
    after the agent ended, is applied by the decision: 3 -> 2 open, the counts the turn
    started from. The workspace decides, so the runner is asked for it."""
    first = turn_end(working(), sources(task_file=2), "worked", turn=Turn(changed=True))
    assert first.state is not None
    s, grown = first.state, sources(task_file=3)
    assert not needs_look(s, Turn(), [], grown)
    assert needs_look(s, Turn(), [cmd("skip")], grown)
    result = decide(s, runner_stop("worked", turn=Turn(changed=False)), [cmd("skip")], grown, NOW)
    assert result.state is not None and result.state.stuck["no_progress"] == 1


def test_a_loop_recorded_with_a_combined_mark_goes_on_from_its_task_counts() -> None:
    """A state written before the workspace was compared within each turn: its combined mark
    gives way to the task counts, and the next turn counts as progress."""
    srcs = sources(task_file=2)
    s = working(stuck={"mark": "abc|task_file:2/0/0", "mode": "work", "no_progress": 1})
    assert not needs_look(s, Turn(), [], srcs)
    result = turn_end(s, srcs, "worked", turn=Turn())
    assert result.state is not None and result.blocked
    assert "mark" not in result.state.stuck and result.state.stuck["no_progress"] == 0
    assert needs_look(result.state, Turn(), [], srcs)
    restarted = decide(s, runner_stop(), [], srcs, NOW)  # a runner's first decision: the baseline
    assert restarted.state is not None and "mark" not in restarted.state.stuck
    assert needs_look(restarted.state, Turn(), [], srcs)


def test_review_loops_are_not_counted_as_no_progress() -> None:
    result = chain(working(), EMPTY, [Turn(changed=False)] * 4)
    assert result.blocked and "escalation" not in kinds(result)


def test_the_same_error_three_times_escalates() -> None:
    srcs = sources(task_file=2)
    s = working()
    for n in range(3):
        result = turn_end(s, srcs, "x", turn=Turn(error="E: boom", changed=True), verification_failure="boom")
        assert result.state is not None
        s = result.state
        if n < 2:
            assert result.blocked and (result.reason or "").startswith("VERIFICATION FAILED")
    assert not result.blocked and s.waiting_for is not None
    assert s.waiting_for["reason"] == "the same error 3 times in a row"


def test_different_errors_do_not_add_up() -> None:
    srcs = sources(task_file=2)
    s = working()
    for error in ["E1", "E2", "E1", "E2"]:
        result = turn_end(s, srcs, "x", turn=Turn(error=error, changed=True), verification_failure=error)
        assert result.blocked and result.state is not None
        s = result.state


def test_the_same_task_failing_three_times_escalates() -> None:
    srcs = sources(task_file=2)
    s = working(current_task="task_file task 0")
    for error in ("exit 1", "exit 2", "timed out"):
        result = turn_end(s, srcs, None, turn=Turn(failure=error, error=error))
        assert result.state is not None
        s = result.state
    assert s.waiting_for is not None and s.waiting_for["escalation"] == "repeated-failures"
    assert s.waiting_for["reason"] == "task 'task_file task 0' failed 3 times"


def test_an_interrupted_turn_counts_nothing() -> None:
    srcs = sources(task_file=2)
    result = chain(working(), srcs, [Turn(changed=False), Turn(interrupted="skip"), Turn(interrupted="skip")])
    assert result.blocked and result.state is not None and result.state.stuck.get("no_progress", 0) == 0


def test_resume_starts_the_counters_over() -> None:
    srcs = sources(task_file=2)
    stuck = chain(working(), srcs, [Turn(changed=False)] * 3)
    assert stuck.state is not None and stuck.state.status == "paused"
    resumed = decide(stuck.state, runner_stop(), [cmd("resume")], srcs, NOW)
    assert resumed.blocked and resumed.state is not None and resumed.state.waiting_for is None
    again = turn_end(resumed.state, srcs, "x", turn=Turn(changed=False))
    assert again.blocked


# --- questions ---------------------------------------------------------------------------------


def test_a_question_waits_for_the_answer_which_reaches_the_next_prompt() -> None:
    srcs = sources(task_file=2)
    asked = turn_end(working(), srcs, "<question>SQLite or Postgres?</question>", turn=Turn(changed=False))
    assert not asked.blocked and asked.state is not None and asked.state.status == "paused"
    assert asked.state.waiting_for is not None and asked.state.waiting_for["kind"] == "question"
    assert ("question", {"question": "SQLite or Postgres?"}) in asked.events
    answered = decide(asked.state, runner_stop(), [cmd("answer", reason="SQLite")], srcs, NOW)
    assert answered.blocked and answered.state is not None and answered.state.waiting_for is None
    assert (answered.reason or "").startswith("A PERSON ANSWERED YOUR QUESTION:\nSQLite")


def test_the_hook_pauses_on_a_question_and_does_not_ask_it_twice() -> None:
    s = state(session_id="s1")
    stop = StopInput("<question>Which?</question>", session_id="s1")
    asked = decide(s, stop, [], sources(task_file=1), NOW)
    assert not asked.blocked and asked.state is not None and asked.state.waiting_kind == "question"
    assert asked.state.waiting_for is not None and asked.state.waiting_for["question"] == "Which?"
    # The answer arrives while the agent's words still hold the question: not asked again.
    answered = decide(asked.state, stop, [cmd("answer", reason="This one")], sources(task_file=1), NOW)
    assert answered.blocked
    assert (answered.reason or "").startswith("A PERSON ANSWERED YOUR QUESTION:\nThis one")


def test_the_answer_reaches_a_fresh_agent_with_its_question_and_the_question_may_come_again() -> None:
    """The runner's next agent did not ask: it reads the question with the answer. Answered,
    the same words asked in a later turn are a new question, put to the person again (they
    were ignored for the rest of the loop)."""
    srcs = sources(task_file=2)
    asked = turn_end(working(), srcs, "<question>Which DB?</question>", turn=Turn(changed=True))
    assert asked.state is not None and asked.state.waiting_kind == "question"
    answered = decide(asked.state, runner_stop(), [cmd("answer", reason="Postgres")], srcs, NOW)
    assert answered.blocked and answered.state is not None
    assert (answered.reason or "").startswith(
        "A PERSON ANSWERED YOUR QUESTION:\nPostgres\n(The question was: Which DB?)\n\n"
    )
    again = turn_end(answered.state, srcs, "<question>Which DB?</question>", turn=Turn(changed=True))
    assert not again.blocked and again.state is not None and again.state.waiting_kind == "question"
    assert ("question", {"question": "Which DB?"}) in again.events


def test_an_answer_to_an_escalation_names_no_question() -> None:
    srcs = sources(task_file=2)
    stuck = chain(working(), srcs, [Turn(changed=False)] * 3)
    assert stuck.state is not None and stuck.state.waiting_kind == "escalation"
    answered = decide(stuck.state, runner_stop(), [cmd("answer", reason="try the other API")], srcs, NOW)
    assert (answered.reason or "").startswith("A PERSON ANSWERED YOUR QUESTION:\ntry the other API\n\n")


# --- escalation at the limit -------------------------------------------------------------------


def test_the_runner_waits_at_the_limit_without_counting_an_iteration() -> None:
    srcs = sources(task_file=2)
    result = turn_end(working(iteration=2, max_iterations=2), srcs, "x", turn=Turn(changed=False))
    assert not result.blocked and result.state is not None
    assert result.state.iteration == 2 and result.state.escalated
    assert result.state.waiting_for is not None and result.state.waiting_for["escalation"] == "max-iterations"
    assert [d["kind"] for k, d in result.events if k == "escalation"] == ["max-iterations"]
    # A resume at the limit is refused, saying how to go on: no turn starts past the limit.
    resumed = decide(result.state, runner_stop(), [cmd("resume")], srcs, NOW)
    assert not resumed.blocked and resumed.state is not None and resumed.state.status == "paused"
    assert resumed.applied[0][1].startswith("not resumed: the loop is at its limit of 2 iterations")
    assert "set-max-iterations" in resumed.applied[0][1]


def test_a_runner_never_starts_a_turn_past_its_limit_whoever_resumed_it() -> None:
    """The limit raised to 3 lifts the wait: one more turn, then the loop waits again, and a
    resume then (the person's `resume` after their `set-max-iterations`) is refused too. A
    loop resumed past its limit before (still escalated, running) waits at its next decision."""
    srcs = sources(task_file=2)
    at_limit = turn_end(working(iteration=2, max_iterations=2), srcs, "x", turn=Turn(changed=False))
    assert at_limit.state is not None
    raised = decide(at_limit.state, runner_stop(), [cmd("set-max-iterations", value=3)], srcs, NOW)
    assert raised.blocked and raised.state is not None and raised.state.iteration == 3
    again = turn_end(raised.state, srcs, "x", turn=Turn(changed=True))
    assert not again.blocked and again.state is not None and again.state.waiting_kind == "escalation"
    late = decide(again.state, runner_stop(), [cmd("resume")], srcs, NOW)
    assert not late.blocked and late.state is not None and late.state.status == "paused"
    earlier = working(iteration=2, max_iterations=2, escalated=True)
    waits = turn_end(earlier, srcs, "x", turn=Turn(changed=True))
    assert not waits.blocked and waits.state is not None and waits.state.status == "paused"
    assert waits.state.iteration == 2


def test_a_resume_at_the_limit_goes_on_once_a_queued_command_raises_it() -> None:
    from loop.core.engine import held_at_limit, resume_flow

    srcs = sources(task_file=2)
    at_limit = turn_end(working(iteration=2, max_iterations=2), srcs, "x", turn=Turn(changed=False))
    assert at_limit.state is not None
    s = at_limit.state
    assert held_at_limit(s, []) is not None
    assert resume_flow(s, "waiting", NOW).state is None  # `loopdeck resume`, its runner gone
    assert held_at_limit(s, [cmd("set-max-iterations", value=4)]) is None
    assert held_at_limit(s, [cmd("set-max-iterations", value=0)]) is None
    assert held_at_limit(s, [cmd("set-max-iterations", value=2)]) is not None


def test_the_hook_keeps_blocking_past_the_limit() -> None:
    s = state(iteration=2, max_iterations=2, session_id="s1")
    result = decide(s, StopInput("x", session_id="s1"), [], sources(task_file=1), NOW)
    assert result.blocked and result.state is not None and result.state.status == "running"
    assert (result.reason or "").startswith("ORCHESTRATOR ESCALATION")


def test_a_higher_limit_from_run_rearms_the_escalation() -> None:
    """`loopdeck run --max-iterations 5` after an escalation at 2: past 5 escalates again."""
    srcs = sources(task_file=9)
    at_limit = turn_end(working(iteration=2, max_iterations=2), srcs, "x", turn=Turn(changed=False))
    assert at_limit.state is not None and at_limit.state.escalated
    raised = configure(at_limit.state, Settings(max_iterations=5, driver="runner", pid=1), NOW)
    assert raised.state is not None and not raised.state.escalated
    assert raised.state.status == "running" and raised.state.waiting_for is None
    assert ("configured", {"max_iterations": 5}) in raised.events
    s = raised.state
    result = decide(s, runner_stop(), [], srcs, NOW)
    while result.blocked:
        assert result.state is not None
        result = turn_end(result.state, srcs, "x", turn=Turn(changed=True))
    assert result.state is not None and result.state.iteration == 5
    assert result.state.waiting_for is not None and result.state.waiting_for["escalation"] == "max-iterations"


def test_configure_changes_nothing_it_is_not_given() -> None:
    s = state(verify=["pytest"], max_iterations=7)
    result = configure(s, Settings(), NOW)
    assert result.state == s and result.events == []


def test_run_continues_a_stopped_loop_but_not_one_waiting_for_a_person() -> None:
    stopped = configure(state(status="stopped"), Settings(driver="runner", pid=9), NOW).state
    assert stopped is not None and stopped.status == "running" and stopped.pid == 9
    waiting = state(status="paused", waiting_for={"kind": "question", "reason": "?", "since": ""})
    kept = configure(waiting, Settings(driver="runner", pid=9), NOW).state
    assert kept is not None and kept.status == "paused"


# --- which queued command wins -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("queue", "status", "archived"),
    [
        (["stop", "pause"], "stopped", False),
        (["stop", "resume"], "stopped", False),
        (["stop", "complete"], "stopped", False),
        (["complete", "pause"], "completed", True),
        (["complete", "stop"], "completed", True),
        (["pause", "stop"], "stopped", False),
        (["pause", "complete"], "completed", True),
        (["pause", "resume"], "running", False),
        (["resume", "pause"], "paused", False),
    ],
)
def test_stop_and_complete_are_final(queue: list[str], status: str, archived: bool) -> None:
    commands = [Command(f"id{i}", "t", kind, "test", person=True) for i, kind in enumerate(queue)]
    result = decide(
        state(session_id="s1"), StopInput("x", session_id="s1"), commands, sources(task_file=1), NOW
    )
    assert result.state is not None and result.state.status == status
    assert (result.effects.archive is not None) is archived
    outcomes = [outcome for _, outcome in result.applied]
    if queue[0] in ("stop", "complete"):
        assert outcomes[1] == "ignored: the loop is ending"


def test_each_applied_skip_skips_one_task() -> None:
    result = decide(
        state(), StopInput("x"), [cmd("skip"), cmd("skip"), cmd("skip")], sources(task_file=2), NOW
    )
    assert result.effects.skip_tasks == 2
    assert [o for _, o in result.applied][-1].startswith("nothing to skip")


# --- asking first ------------------------------------------------------------------------------


def test_needs_sources() -> None:
    s = state()
    assert needs_sources(s, StopInput("x"), [])
    assert not needs_sources(s, StopInput("x"), [cmd("pause")])
    assert needs_sources(s, StopInput("x"), [cmd("pause"), cmd("skip")])
    assert needs_sources(s, StopInput("x"), [cmd("complete")])
    assert not needs_sources(state(status="completed"), StopInput("x"), [])
    assert not needs_sources(state(session_id="a"), StopInput("x", session_id="b"), [])


def test_wants_verification_only_when_the_decision_could_complete() -> None:
    s = state(verify=["pytest -q"])
    assert wants_verification(s, StopInput("ALL_TASKS_COMPLETE"), EMPTY)
    assert not wants_verification(s, StopInput("ALL_TASKS_COMPLETE"), sources(task_file=1))
    assert not wants_verification(s, StopInput("still working"), EMPTY)
    assert wants_verification(state(verify=["pytest"], verification_mode=True), StopInput("x"), EMPTY)
    assert not wants_verification(state(), StopInput("ALL_TASKS_COMPLETE"), EMPTY)


def test_no_loop_completes_red() -> None:
    s = state(verify=["pytest -q"])
    unverified = decide(s, StopInput("ALL_TASKS_COMPLETE"), [], EMPTY, NOW)
    assert unverified.blocked and (unverified.reason or "").startswith("VERIFICATION REQUIRED")
    failed = decide(s, StopInput("ALL_TASKS_COMPLETE", verification_failure="1 failed"), [], EMPTY, NOW)
    assert failed.blocked and failed.effects.archive is None
    passed = decide(s, StopInput("ALL_TASKS_COMPLETE", verified=True), [], EMPTY, NOW)
    assert passed.effects.archive is not None
    # After the review loops too: the last one needs the commands green.
    done = state(verify=["pytest -q"], verification_mode=True, verification_remaining=0)
    assert decide(done, StopInput("reviewed"), [], EMPTY, NOW).blocked
    assert decide(done, StopInput("reviewed", verified=True), [], EMPTY, NOW).effects.archive is not None


# --- signals and restores ----------------------------------------------------------------------


def test_sigint_pauses_and_sigterm_stops() -> None:
    paused = interrupt(state(), True, "SIGINT to the runner", NOW).state
    assert paused is not None and paused.status == "paused"
    assert paused.waiting_for == {
        "kind": "pause",
        "reason": "SIGINT to the runner",
        "since": "2026-01-09T11:30:00+00:00",
    }
    stopped = interrupt(state(), False, "SIGTERM to the runner", NOW).state
    assert stopped is not None and stopped.status == "stopped" and stopped.waiting_for is None
    assert interrupt(state(status="completed"), False, "x", NOW).state is None


def test_a_restore_skips_commands_already_applied() -> None:
    backup = state(control_offset=0)
    queued = [
        Command("a", "t", "skip", "tui", end=40, person=True),
        Command("b", "t", "pause", "tui", end=80, person=True),
        Command("c", "t", "resume", "tui", end=120, person=True),
    ]
    result = restore(backup, queued, applied={"a", "b"})
    assert result.state is not None and result.state.control_offset == 80 and result.offset == 80
    assert ("restored", {"from": "backup", "already_applied": 2}) in result.events
    assert restore(backup, queued, applied=set()).offset == 0


# --- what the agent is told --------------------------------------------------------------------


def test_the_runners_first_prompt_is_a_first_prompt() -> None:
    result = decide(state(driver="runner"), runner_stop(), [], sources(task_file=2), NOW)
    prompt = result.reason or ""
    assert result.blocked and prompt.startswith("Build the todo API")
    assert "CONTINUATION" not in prompt and "task_file task 0" in prompt
    assert "tick it (`- [ ]` → `- [x]`)" in prompt and "ALL_TASKS_COMPLETE" in prompt


def test_every_work_prompt_says_how_each_active_source_records_progress() -> None:
    srcs = sources(task_file=1, claude_tasks=1)
    prompt = decide(state(), StopInput("x"), [], srcs, NOW).reason or ""
    assert "tick it (`- [ ]` → `- [x]`)" in prompt and "`- [-]`" in prompt
    assert "set its status to completed (TaskUpdate)" in prompt
    assert "GitHub" not in prompt  # not an active source here
    claimed = decide(state(), StopInput("ALL_TASKS_COMPLETE"), [], srcs, NOW).reason or ""
    assert "TaskUpdate" in claimed and "- [x]" in claimed
    failed = decide(state(), StopInput("x", verification_failure="1 failed"), [], srcs, NOW).reason or ""
    assert "TaskUpdate" in failed


# --- left alone overnight ----------------------------------------------------------------------


def test_a_usage_limit_waits_until_it_resets_without_counting_anything() -> None:
    srcs = sources(task_file=2)
    s = working()
    limited = turn_end(
        s, srcs, None, turn=Turn(limited="limit reached · resets 5pm", resets_at="2026-01-09T17:00:00+00:00")
    )
    assert not limited.blocked and limited.state is not None
    waiting = limited.state.waiting_for
    assert (
        waiting is not None
        and waiting["kind"] == "usage-limit"
        and waiting["until"] == "2026-01-09T17:00:00+00:00"
    )
    assert limited.state.status == "running" and limited.state.stuck.get("errors") is None
    assert (
        "usage-limit",
        {"reason": "limit reached · resets 5pm", "until": "2026-01-09T17:00:00+00:00"},
    ) in limited.events
    # Woken early (a command arrived): still waiting.
    early = decide(limited.state, runner_stop(), [cmd("set-max-iterations", 200)], srcs, NOW)
    assert not early.blocked and early.state is not None and early.state.waiting_kind == "usage-limit"
    # After the reset: back to work by itself.
    from datetime import timedelta

    later = decide(limited.state, runner_stop(), [], srcs, NOW + timedelta(hours=6))
    assert later.blocked and later.state is not None and later.state.waiting_for is None
    assert "limit-lifted" in kinds(later)


def test_the_engine_picks_the_agent_while_limits_hold_some() -> None:
    """The first choice whenever it is free, the fallback while the first is held, none (wait)
    when every one is held; the drivers only carry the choice out."""
    from datetime import timedelta

    from loop.core.engine import agent_for_turn, limit_until

    later = NOW + timedelta(hours=1)
    assert agent_for_turn([None, None], 0, NOW) == 0
    assert agent_for_turn([later, None], 0, NOW) == 1  # the first limited: to the fallback
    assert agent_for_turn([later, None], 1, NOW) == 1
    assert agent_for_turn([later, None], 1, later) == 0  # its reset passed: back to the first
    assert agent_for_turn([later, later], 1, NOW) is None
    assert agent_for_turn([later, None, None], 2, NOW) == 2  # the one in use stays while free
    # a reset the agent said; else a back-off growing with the limits in a row that did not say
    assert limit_until(later.isoformat(), 3, NOW) == (later, 3)
    assert limit_until(None, 0, NOW) == (NOW + timedelta(seconds=60), 1)
    assert limit_until(NOW.isoformat(), 1, NOW) == (NOW + timedelta(seconds=300), 2)
    assert limit_until("", 99, NOW)[0] == NOW + timedelta(seconds=3600)


def test_a_limit_without_a_reset_time_backs_off_longer_each_time() -> None:
    srcs = sources(task_file=2)
    first = turn_end(working(), srcs, None, turn=Turn(limited="429"))
    assert first.state is not None and first.state.waiting_for is not None
    assert first.state.waiting_for["until"] == "2026-01-09T11:31:00+00:00"
    again = turn_end(first.state, srcs, None, turn=Turn(limited="429"))
    assert again.state is not None and again.state.waiting_for is not None
    assert again.state.waiting_for["until"] == "2026-01-09T11:35:00+00:00"


def test_cost_is_summed_and_the_budget_escalates() -> None:
    srcs = sources(task_file=3)
    s = working(limits={"max_cost_micro_usd": 1_000_000})
    first = turn_end(
        s, srcs, "x", turn=Turn(changed=False, usage={"cost_micro_usd": 600_000, "output_tokens": 10})
    )
    assert first.blocked and first.state is not None
    assert first.state.usage == {"cost_micro_usd": 600_000, "output_tokens": 10}
    second = turn_end(first.state, srcs, "x", turn=Turn(changed=True, usage={"cost_micro_usd": 500_000}))
    assert not second.blocked and second.state is not None
    assert second.state.waiting_for is not None and second.state.waiting_for["escalation"] == "max-cost"
    assert "reached the budget of $1.00" in second.state.waiting_for["reason"]
    # A higher budget lets it work again.
    raised = configure(second.state, Settings(limits={"max_cost_micro_usd": 5_000_000}), NOW)
    assert raised.state is not None and raised.state.waiting_for is None and raised.state.status == "running"


def test_stuck_thresholds_are_the_persons() -> None:
    srcs = sources(task_file=2)
    patient = chain(working(limits={"stuck_after": 4}), srcs, [Turn(changed=False)] * 4)
    assert patient.blocked
    strict = chain(working(limits={"stuck_after": 1}), srcs, [Turn(changed=False)] * 2)
    assert not strict.blocked


def test_a_note_reaches_the_next_prompt_once() -> None:
    srcs = sources(task_file=2)
    said = decide(state(), StopInput("x"), [cmd("say", reason="Use SQLite, not Postgres")], srcs, NOW)
    assert said.blocked and (said.reason or "").startswith("A PERSON WATCHING THE LOOP SAYS:\n- Use SQLite")
    assert ("said", {"note": "Use SQLite, not Postgres", "source": "test"}) in said.events
    assert said.state is not None
    after = decide(said.state, StopInput("x"), [], srcs, NOW)
    assert "A PERSON WATCHING" not in (after.reason or "")


def _task_file(pending: int = 0, done: int = 0, skipped: int = 0, in_progress: int = 0) -> Aggregate:
    from tests.test_engine import report

    return combine([replace(report("task_file", pending, in_progress, done), skipped=skipped)])


def test_a_task_file_cut_to_nothing_escalates_to_a_person_for_the_hook() -> None:
    """Regression: a TODO.md emptied (an agent killed mid-write, or one that emptied it) was
    uncertain for one Stop, then counted as "all done": the loop completed, 5 tasks never done."""
    s = decide(state(task_file="TODO.md"), StopInput("x"), [], _task_file(5), NOW).state
    assert s is not None and s.extra["task_file_counts"] == {"open": 5, "done": 0, "skipped": 0}
    emptied = _task_file()
    result = decide(s, StopInput("x"), [], emptied, NOW)
    assert result.action == "allow" and result.state is not None
    assert result.state.status == "paused"
    assert result.state.waiting_for == {
        "kind": "escalation",
        "escalation": "tasks-vanished",
        "reason": "5 open tasks vanished from TODO.md",
        "since": "2026-01-09T11:30:00+00:00",
    }
    assert ("escalation", {"kind": "tasks-vanished", "reason": "5 open tasks vanished from TODO.md"}) in (
        result.events
    )
    # The hook lets the session stop, with one line for the person.
    assert result.system_message == (
        "loopdeck: loop paused, waiting for a person (5 open tasks vanished from TODO.md)"
    )
    assert "\n" not in result.system_message
    # Every later Stop waits too: never completes, never reviews.
    for _ in range(3):
        again = decide(result.state, StopInput("ALL_TASKS_COMPLETE"), [], emptied, NOW)
        assert again.action == "allow" and again.effects.archive is None
        assert again.state is not None and again.state.status == "paused"
        result = again


def test_the_runner_waits_too_and_a_persons_resume_accepts_the_new_count() -> None:
    s = working(task_file="TODO.md")
    first = turn_end(s, _task_file(3, done=2), "worked", turn=Turn(changed=False))
    assert first.blocked and first.state is not None
    cut = turn_end(first.state, _task_file(pending=1), "worked", turn=Turn(changed=True))
    assert not cut.blocked and cut.state is not None and cut.state.status == "paused"
    assert cut.state.waiting_for is not None
    assert cut.state.waiting_for["reason"] == "2 open tasks vanished from TODO.md"
    assert "completed" not in kinds(cut)
    # The runner waits for a command; a person resumes: the file as it is now is the count.
    resumed = turn_end(cut.state, _task_file(pending=1), None, cmd("resume"))
    assert resumed.blocked and resumed.state is not None and resumed.state.status == "running"
    assert (resumed.reason or "").startswith("ORCHESTRATOR CONTINUATION")
    # `loopdeck resume` (the resumption flow) accepts it the same way.
    from loop.core.engine import resume_flow

    flowed = resume_flow(cut.state, "waiting", NOW)
    assert flowed.state is not None
    after = turn_end(flowed.state, _task_file(pending=1), "worked", turn=Turn(changed=True))
    assert after.blocked and "escalation" not in kinds(after)


@pytest.mark.parametrize(
    ("before", "after", "escalates"),
    [
        ((4, 0, 0), (2, 2, 0), False),  # two ticked: done grew as open shrank
        ((4, 0, 0), (0, 3, 1), False),  # all finished: three done, one skipped
        ((4, 0, 0), (6, 0, 0), False),  # tasks added
        ((4, 0, 0), (3, 0, 0), False),  # one removed on purpose: not "most of them"
        ((6, 0, 0), (3, 0, 0), False),  # half of them is not more than half
        ((6, 0, 0), (2, 0, 0), True),  # four of six vanished
        ((3, 0, 0), (1, 0, 0), True),  # two of three vanished
        ((5, 3, 0), (0, 3, 0), True),  # the open ones gone, the done ones kept
        ((1, 4, 0), (0, 0, 0), True),  # the file emptied
        ((1, 0, 0), (0, 0, 0), True),  # the file emptied of its last open task
        ((0, 4, 0), (0, 0, 0), False),  # no open task lost (done ones tidied away)
        ((30, 0, 0), (20, 2, 0), False),  # ordinary progress on a long file
    ],
)
def test_which_losses_escalate(
    before: tuple[int, int, int], after: tuple[int, int, int], escalates: bool
) -> None:
    s = working(task_file="TODO.md")
    s.extra["task_file_counts"] = dict(zip(("open", "done", "skipped"), before, strict=True))
    pending, done, skipped = after
    result = turn_end(s, _task_file(pending, done, skipped), "worked", turn=Turn(changed=False))
    assert result.state is not None
    escalated = result.state.waiting_for is not None and result.state.waiting_for.get("escalation") == (
        "tasks-vanished"
    )
    assert escalated is escalates, (before, after, kinds(result))


def test_a_count_record_that_is_not_counts_is_a_fresh_start() -> None:
    for junk in ("5", {"open": "5"}, {"open": True, "done": 0, "skipped": 0}, {"open": -3}, None):
        s = working(task_file="TODO.md")
        s.extra["task_file_counts"] = junk
        s.extra["task_file_boxes"] = 30  # the older record (a box total) is dropped
        result = turn_end(s, _task_file(), "worked", turn=Turn(changed=False))
        assert result.state is not None and "task_file_boxes" not in result.state.extra
        assert result.state.extra["task_file_counts"] == {"open": 0, "done": 0, "skipped": 0}
        assert "escalation" not in kinds(result), junk


def test_skipped_tasks_have_not_vanished() -> None:
    s = decide(state(task_file="TODO.md"), StopInput("x"), [], _task_file(3), NOW).state
    assert s is not None
    skipped = decide(s, StopInput("x"), [cmd("skip"), cmd("skip")], _task_file(3), NOW)
    assert skipped.blocked and skipped.state is not None and "escalation" not in kinds(skipped)
    assert skipped.state.extra["task_file_counts"] == {"open": 1, "done": 0, "skipped": 2}
    then = decide(skipped.state, StopInput("x"), [], _task_file(0, done=1, skipped=2), NOW)
    assert then.blocked and "escalation" not in kinds(then)
    assert (then.reason or "").startswith("VERIFICATION LOOP 1")


def test_ordinary_progress_is_not_a_cut() -> None:
    from tests.test_engine import report

    s = decide(state(), StopInput("x"), [], combine([report("task_file", 4)]), NOW).state
    assert s is not None
    ticked = decide(s, StopInput("x"), [], combine([report("task_file", 2, 0, 2)]), NOW)
    assert (ticked.reason or "").startswith("ORCHESTRATOR CONTINUATION")


# --- an answer is not a resume -------------------------------------------------------------------


@pytest.mark.parametrize(
    "waiting",
    [
        {"kind": "pause", "reason": "reviewing", "since": "t"},
        {"kind": "usage-limit", "reason": "limit", "since": "t", "until": "2026-01-09T12:00:00+00:00"},
    ],
)
def test_an_answer_with_no_question_pending_keeps_a_paused_loop_paused(waiting: dict[str, str]) -> None:
    paused = state(session_id="s1", status="paused", waiting_for=waiting)
    result = decide(
        paused, StopInput(None, session_id="s1"), [cmd("answer", reason="SQLite")], sources(task_file=1), NOW
    )
    assert result.state is not None and result.state.status == "paused"
    assert result.state.waiting_for == waiting and not result.blocked
    assert "resumed" not in kinds(result)
    assert result.state.extra["answer"] == "SQLite"  # kept for the next prompt, once it goes on
    assert "stays paused" in result.applied[0][1]
    resumed = decide(
        result.state, StopInput(None, session_id="s1"), [cmd("resume")], sources(task_file=1), NOW
    )
    assert resumed.blocked and (resumed.reason or "").startswith("A PERSON ANSWERED YOUR QUESTION:\nSQLite")


# --- a claim nobody can check ---------------------------------------------------------------------


def _unreadable() -> Aggregate:
    return combine([report("task_file", available=False, error="TODO.md is a folder")])


def test_a_completion_claim_with_an_unreadable_source_goes_to_a_person_after_the_conservative_block() -> None:
    s = state(session_id="s1")
    first = decide(s, StopInput("ALL_TASKS_COMPLETE", session_id="s1"), [], _unreadable(), NOW)
    # The first time, the agent is asked to check the source itself (it may not have seen why).
    assert first.blocked and (first.reason or "").startswith("TASK CHECK FAILED")
    assert first.state is not None
    claimed = decide(first.state, StopInput("ALL_TASKS_COMPLETE", session_id="s1"), [], _unreadable(), NOW)
    assert not claimed.blocked and claimed.state is not None
    assert claimed.state.status == "paused"
    assert claimed.state.waiting_for is not None
    assert claimed.state.waiting_for["escalation"] == "uncertain-sources"
    assert "says every task is done" in claimed.state.waiting_for["reason"]
    assert "Task file" in claimed.state.waiting_for["reason"]
    assert [d["kind"] for k, d in claimed.events if k == "escalation"] == ["uncertain-sources"]
    # A person forces completion: the loop ends (the only way out before, and still one).
    done = decide(claimed.state, StopInput(None, session_id="s1"), [cmd("complete")], _unreadable(), NOW)
    assert done.effects.archive is not None


def test_work_with_an_unreadable_source_still_blocks_conservatively() -> None:
    first = decide(
        state(session_id="s1"), StopInput("working on it", session_id="s1"), [], _unreadable(), NOW
    )
    assert first.state is not None
    again = decide(first.state, StopInput("still working", session_id="s1"), [], _unreadable(), NOW)
    assert again.blocked and (again.reason or "").startswith("TASK CHECK FAILED")


def test_the_runner_asks_a_person_when_its_agent_claims_completion_it_cannot_check() -> None:
    s = working(extra={"uncertain_escalated": True}, stuck={"mode": "uncertain", "tasks": "m"})
    result = decide(s, runner_stop("ALL_TASKS_COMPLETE", turn=Turn(changed=False)), [], _unreadable(), NOW)
    assert not result.blocked and result.state is not None and result.state.status == "paused"
    assert result.state.waiting_for is not None
    assert result.state.waiting_for["escalation"] == "uncertain-sources"


def test_an_answer_to_an_escalation_goes_on_with_it() -> None:
    """An escalation asks a person: the answer is theirs (the workers' deadlock is answered so)."""
    waiting = {"kind": "escalation", "reason": "stuck", "since": "t", "escalation": "stuck"}
    paused = state(session_id="s1", status="paused", waiting_for=waiting)
    result = decide(
        paused, StopInput(None, session_id="s1"), [cmd("answer", reason="try B")], sources(task_file=1), NOW
    )
    assert result.blocked and result.state is not None and result.state.waiting_for is None
    assert (result.reason or "").startswith("A PERSON ANSWERED YOUR QUESTION:\ntry B")

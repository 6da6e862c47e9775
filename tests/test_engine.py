"""Every rule of seed 000 §3.3–3.6, on the pure engine: no files, no processes, a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loop.core.engine import decide, needs_sources
from loop.core.model import Aggregate, Command, LoopState, Result, SourceReport, StopInput, TaskItem, combine

NOW = datetime(2026, 1, 9, 11, 30, tzinfo=UTC)


def report(
    name: str,
    pending: int = 0,
    in_progress: int = 0,
    done: int = 0,
    *,
    available: bool = True,
    error: str | None = None,
) -> SourceReport:
    items = tuple(TaskItem(f"{name} task {i}", "pending", line=i + 1) for i in range(pending)) + tuple(
        TaskItem(f"{name} doing {i}", "in_progress", line=100 + i) for i in range(in_progress)
    )
    return SourceReport(
        name,
        True,
        available,
        pending,
        in_progress,
        done,
        items,
        error,
        detail="TODO.md" if name == "task_file" else None,
    )


def sources(**counts: int) -> Aggregate:
    return combine([report(name, n) for name, n in counts.items()])


EMPTY = sources(task_file=0, todos=0)


def state(**values: object) -> LoopState:
    s = LoopState.new("Build the todo API", started_at="2026-01-09T10:30:00+00:00")
    for key, value in values.items():
        setattr(s, key, value)
    return s


def stop(text: str | None = None, **kw: object) -> StopInput:
    return StopInput(last_text=text, session_id=kw.pop("session_id", "s1"), **kw)  # type: ignore[arg-type]


def cmd(kind: str, value: int | None = None, reason: str | None = None) -> Command:
    return Command(f"id-{kind}", "t", kind, "test", reason, value, person=True)


def play(s: LoopState, srcs: Aggregate, *commands: Command, text: str | None = None, **kw: object) -> Result:
    return decide(s, stop(text, **kw), list(commands), srcs, NOW)


def kinds(result: Result) -> list[str]:
    return [k for k, _ in result.events]


# --- the flow ------------------------------------------------------------------------------


def test_no_state_allows() -> None:
    result = decide(None, stop("x"), [], EMPTY, NOW)
    assert result.action == "allow" and result.state is None and result.events == []


def test_other_session_is_let_through_untouched() -> None:
    result = play(state(session_id="mine"), sources(task_file=3), session_id="theirs")
    assert result.action == "allow" and result.state is None and result.events == []


@pytest.mark.parametrize("status", ["completed", "stopped", "failed"])
def test_ended_loop_allows(status: str) -> None:
    assert play(state(status=status), sources(task_file=3)).state is None


def test_first_stop_binds_session_and_transcript() -> None:
    result = play(state(), sources(task_file=1), transcript_path="/t.jsonl")
    assert result.state is not None
    assert result.state.session_id == "s1" and result.state.transcript_path == "/t.jsonl"
    assert result.state.driver == "hook" and kinds(result)[0] == "session-bound"


def test_pending_blocks_with_continuation_prompt() -> None:
    srcs = combine([report("task_file", 2), report("todos", 0, 1), report("github", 0)])
    result = play(state(iteration=4), srcs)
    assert result.action == "block" and result.state is not None
    assert result.state.iteration == 5
    assert result.system_message == "Orchestrator iteration 5/100 | 3 pending tasks across 2 sources"
    reason = result.reason or ""
    assert reason.startswith("ORCHESTRATOR CONTINUATION - DO NOT STOP\n\nBuild the todo API")
    assert "- Task file (TODO.md): 2 pending" in reason
    assert "[pending] line 1: task_file task 0" in reason
    assert "- TODO list: 0 pending, 1 in progress" in reason
    assert "ALL_TASKS_COMPLETE on a line by itself" in reason
    assert result.state.current_task == "task_file task 0"
    assert kinds(result) == ["session-bound", "progress", "blocked"]


def test_singular_message_and_no_limit() -> None:
    result = play(state(max_iterations=0), sources(task_file=1))
    assert result.system_message == "Orchestrator iteration 1 | 1 pending task across 1 source"


def test_promise_configured_prompt_names_it() -> None:
    result = play(state(completion_promise="SPRINT COMPLETE"), sources(task_file=1))
    assert "<promise>SPRINT COMPLETE</promise>" in (result.reason or "")


def test_verification_loops_then_archive() -> None:
    s = state(iteration=3)
    messages = []
    for _ in range(4):
        result = play(s, EMPTY)
        assert result.action == "block" and result.state is not None
        s = result.state
        messages.append(result.system_message)
        assert (result.reason or "").startswith(f"VERIFICATION LOOP {len(messages)} of 4")
    assert messages[0] == "Orchestrator iteration 4/100 | verification loop 1 of 4"
    assert s.verification_mode and s.verification_remaining == 0 and s.iteration == 7
    final = play(s, EMPTY)
    assert final.action == "allow" and final.state is not None
    assert final.state.status == "completed"
    archive = final.effects.archive
    assert archive is not None and archive["reason"] == "all sources empty and verified"
    assert archive["iterations"] == 7 and archive["duration_s"] == 3600.0
    assert "completed" in kinds(final)


def test_verification_seed_checklist_in_prompt() -> None:
    reason = play(state(), EMPTY).reason or ""
    for line in (
        "Errors and missing elements",
        "Workarounds instead of proper fixes",
        "Outdated documentation",
    ):
        assert line in reason


def test_custom_and_zero_verify_loops() -> None:
    result = play(state(verify_loops=2), EMPTY)
    assert (result.reason or "").startswith("VERIFICATION LOOP 1 of 2")
    assert play(state(verify_loops=0), EMPTY).action == "allow"


def test_task_appearing_during_verification_goes_back_to_work() -> None:
    s = play(play(state(), EMPTY).state, EMPTY).state  # type: ignore[arg-type]
    assert s is not None and s.verification_remaining == 2
    result = play(s, sources(todos=1))
    assert result.action == "block" and result.state is not None
    assert not result.state.verification_mode and result.state.verification_remaining == 0
    assert "verification-interrupted" in kinds(result)
    again = play(result.state, EMPTY)
    assert (again.reason or "").startswith("VERIFICATION LOOP 1 of 4")


# --- completion signals --------------------------------------------------------------------


def test_all_tasks_complete_archives_and_allows() -> None:
    result = play(state(iteration=9), EMPTY, text="Everything is done.\nALL_TASKS_COMPLETE")
    assert result.action == "allow" and result.state is not None and result.state.status == "completed"
    assert result.effects.archive is not None
    assert result.effects.archive["reason"] == "ALL_TASKS_COMPLETE signalled by the agent"
    assert result.state.iteration == 9


def test_promise_must_match() -> None:
    s = state(completion_promise="SHIP IT")
    assert play(s, EMPTY, text="<promise>SHIP IT</promise>").action == "allow"
    assert play(s, EMPTY, text="<promise>SHIP</promise>").effects.archive is None


def test_echoed_prompt_promise_does_not_complete() -> None:
    s = state(completion_promise="DONE")
    s.body = "\nBuild it. Output <promise>DONE</promise> when finished.\n"
    text = "Task: Build it. Output <promise>DONE</promise> when finished.\nOn it."
    assert play(s, sources(task_file=1), text=text).action == "block"


def test_completion_claimed_with_open_tasks_blocks_and_lists_them() -> None:
    result = play(state(), sources(task_file=2), text="ALL_TASKS_COMPLETE")
    assert result.action == "block" and result.effects.archive is None
    warnings = [d["message"] for k, d in result.events if k == "warning"]
    assert "2 task(s) still open" in warnings[0]
    prompt = result.reason or ""
    assert "task_file task 0" in prompt and "task_file task 1" in prompt
    assert "- [-]" in prompt and "force" in prompt


# --- escalation ------------------------------------------------------------------------------


def test_max_iterations_escalates_never_exits() -> None:
    s = state(max_iterations=2)
    results = []
    for _ in range(4):
        result = play(s, sources(task_file=1))
        assert result.action == "block" and result.state is not None
        s = result.state
        results.append(result)
    assert [(r.reason or "").split("\n")[0] for r in results] == [
        "ORCHESTRATOR CONTINUATION - DO NOT STOP",
        "ORCHESTRATOR CONTINUATION - DO NOT STOP",
        "ORCHESTRATOR ESCALATION - ITERATION THRESHOLD REACHED",
        "ORCHESTRATOR ESCALATION - ITERATION THRESHOLD REACHED",
    ]
    assert "The orchestrator has completed 2 iterations" in (results[2].reason or "")
    assert "task_file task 0" in (results[2].reason or "")
    assert [sum(k == "escalation" for k in kinds(r)) for r in results] == [0, 0, 1, 0]
    assert "ESCALATION" in (results[3].system_message or "")
    raised = play(s, sources(task_file=1), cmd("set-max-iterations", 10))
    assert raised.state is not None and raised.state.max_iterations == 10 and not raised.state.escalated
    assert (raised.reason or "").startswith("ORCHESTRATOR CONTINUATION")
    assert raised.applied[0][1] == "max iterations 2 → 10"


def test_no_limit_never_escalates() -> None:
    result = play(state(max_iterations=0, iteration=10_000), sources(task_file=1))
    assert "ESCALATION" not in (result.reason or "")


def test_verification_past_the_limit_keeps_verifying() -> None:
    result = play(state(max_iterations=1, iteration=5), EMPTY)
    assert (result.reason or "").startswith("VERIFICATION LOOP 1")


# --- uncertainty ---------------------------------------------------------------------------


def test_unavailable_source_blocks_conservatively_naming_it() -> None:
    srcs = combine([report("github", available=False, error="gh is not logged in"), report("task_file", 0)])
    result = play(state(), srcs)
    assert result.action == "block"
    assert (result.reason or "").startswith(
        "TASK CHECK FAILED - manually verify and output ALL_TASKS_COMPLETE"
    )
    assert "- GitHub project: gh is not logged in" in (result.reason or "")
    assert (
        result.system_message
        == "Orchestrator iteration 1/100 | TASK CHECK FAILED: cannot read GitHub project"
    )


def test_uncertain_sources_escalate_once_per_stretch() -> None:
    bad = combine([report("github", available=False, error="gh timed out"), report("task_file", 1)])
    first = play(state(), bad)
    assert [d["kind"] for k, d in first.events if k == "escalation"] == ["uncertain-sources"]
    second = play(first.state, bad)  # type: ignore[arg-type]
    assert "escalation" not in kinds(second)
    healed = play(second.state, sources(task_file=1))  # type: ignore[arg-type]
    again = play(healed.state, bad)  # type: ignore[arg-type]
    assert "escalation" in kinds(again)


def test_uncertain_during_verification_leaves_it() -> None:
    s = play(state(), EMPTY).state
    assert s is not None
    srcs = combine([report("todos", available=False, error="x")])
    result = play(s, srcs)
    assert result.state is not None and not result.state.verification_mode


# --- commands ------------------------------------------------------------------------------


never = None
"""The sources, where `needs_sources` says the decision does not look at them."""


def test_pause_allows_and_keeps_state_then_resume_blocks() -> None:
    assert not needs_sources(state(), stop("x"), [cmd("pause", reason="lunch")])
    result = decide(state(), stop("x"), [cmd("pause", reason="lunch")], never, NOW)
    assert result.action == "allow" and result.state is not None and result.state.status == "paused"
    assert "paused" in (result.system_message or "")
    assert result.applied[0][1] == "paused"
    again = decide(result.state, stop("x"), [], never, NOW)
    assert again.action == "allow" and again.state is not None and again.state.iteration == 0
    resumed = play(again.state, sources(task_file=1), cmd("resume"))
    assert resumed.action == "block" and resumed.state is not None
    assert resumed.state.status == "running" and resumed.state.iteration == 1


def test_resume_when_not_paused_is_harmless() -> None:
    result = play(state(), sources(task_file=1), cmd("resume"))
    assert result.applied[0][1] == "not paused (running)" and result.action == "block"


def test_stop_command() -> None:
    assert needs_sources(state(), stop(), [cmd("stop")])  # its summary names the tasks left
    result = decide(state(), stop(), [cmd("stop")], sources(task_file=2), NOW)
    assert result.action == "allow" and result.state is not None and result.state.status == "stopped"
    summary = result.effects.summary
    assert summary is not None and summary["outcome"] == "stopped" and summary["pending_at_end"] == 2
    assert play(result.state, sources(task_file=1)).state is None


def test_complete_forces_with_pending_tasks() -> None:
    result = play(state(), sources(task_file=3), cmd("complete", reason="good enough"))
    assert result.action == "allow" and result.effects.archive is not None
    assert result.effects.archive["reason"] == "forced by user"
    assert result.effects.archive["note"] == "good enough"
    assert not [d for k, d in result.events if k == "warning"]


def test_skip_in_work_mode_marks_and_recounts() -> None:
    result = play(state(), sources(task_file=1), cmd("skip"))
    assert result.effects.skip_tasks == 1
    assert (result.reason or "").startswith("VERIFICATION LOOP 1")  # the only task was skipped
    two = play(state(), sources(task_file=2), cmd("skip"))
    assert two.system_message == "Orchestrator iteration 1/100 | 1 pending task across 1 source"


def test_skip_prefers_the_in_progress_task() -> None:
    srcs = combine([report("task_file", 1, 1)])
    result = play(state(), srcs, cmd("skip"))
    assert "task_file doing 0" not in (result.reason or "") and "task_file task 0" in (result.reason or "")


def test_skip_with_nothing_in_the_task_file() -> None:
    result = play(state(), sources(todos=1), cmd("skip"))
    assert not result.effects.skip_tasks
    assert result.applied[0][1].startswith("nothing to skip")


def test_skip_in_verification_skips_a_loop() -> None:
    s = play(state(), EMPTY).state  # loop 1 prompted, 3 remaining
    result = play(s, EMPTY, cmd("skip"))  # type: ignore[arg-type]
    assert result.applied[0][1] == "verification loop 2 skipped"
    assert (result.reason or "").startswith("VERIFICATION LOOP 3 of 4")


def test_commands_apply_in_order() -> None:
    result = play(state(), sources(task_file=1), cmd("pause"), cmd("resume"), cmd("set-max-iterations", 7))
    assert result.action == "block" and result.state is not None
    assert result.state.status == "running" and result.state.max_iterations == 7
    assert [o for _, o in result.applied] == ["paused", "resumed", "max iterations 100 → 7"]


# --- Claude Code's block cap, ralph-loop, limits ---------------------------------------------


def test_block_cap_warning_exactly_before_the_override() -> None:
    """Claude Code delivers 8 blocks in a row and overrides the 9th: the 8th warns, the 9th is
    an allow that counts no iteration (the agent never sees it)."""
    s = state()
    results = []
    for i in range(9):
        result = play(s, sources(task_file=1), stop_hook_active=i > 0)
        assert result.state is not None
        s = result.state
        results.append(result)
    assert [r.action for r in results] == ["block"] * 8 + ["allow"]
    assert ["cap of 8" in (r.system_message or "") for r in results] == [False] * 7 + [True, True]
    assert "at the next Stop" in (results[7].system_message or "")
    assert s.iteration == 8 and s.consecutive_blocks == 8
    fresh = play(s, sources(task_file=1), stop_hook_active=False)
    assert fresh.state is not None and fresh.state.consecutive_blocks == 1 and fresh.state.iteration == 9


def test_the_cap_count_restarts_after_a_tool_round() -> None:
    s = state(consecutive_blocks=8)
    result = play(s, sources(task_file=1), stop_hook_active=True, tool_round=True)
    assert result.blocked and result.state is not None and result.state.consecutive_blocks == 1
    assert "cap" not in (result.system_message or "")


def test_an_overridden_block_changes_no_review_loop() -> None:
    s = state(consecutive_blocks=8, verification_mode=True, verification_remaining=2)
    result = play(s, EMPTY, stop_hook_active=True)
    assert result.action == "allow" and result.state is not None
    assert result.state.verification_remaining == 2 and result.state.iteration == 0


def test_no_cap_no_warning() -> None:
    result = play(state(consecutive_blocks=50), sources(task_file=1), stop_hook_active=True, block_cap=None)
    assert "cap" not in (result.system_message or "")


def test_ralph_coexistence_warning() -> None:
    result = play(state(), sources(task_file=1), ralph_active=True)
    assert "ralph-loop is active too" in (result.system_message or "")
    assert any("Both orchestrator-loop AND ralph-loop" in d.get("message", "") for _, d in result.events)
    again = play(result.state, sources(task_file=1), ralph_active=True)  # type: ignore[arg-type]
    assert not [d for k, d in again.events if k == "warning"]


def test_prompt_is_capped_under_claude_codes_limit() -> None:
    s = state()
    s.body = "\n" + "word " * 5000 + "\n"
    result = play(s, sources(task_file=1))
    assert len(result.reason or "") < 10_000 and (result.reason or "").endswith("(truncated by loopdeck)")


def test_input_state_is_not_mutated() -> None:
    s = state()
    play(s, sources(task_file=1), cmd("pause"))
    assert s.iteration == 0 and s.status == "running" and s.session_id is None

"""Progress judged on the tests, in the engine, on a fixed clock: what a turn moved, when the
loop is stuck or repeats the same failure, which prompt a failure's kind picks, and what the
state keeps of the last checks (`last_validation`)."""

from __future__ import annotations

from typing import Any

from loop.core import engine, progress
from loop.core.model import LoopState, StopInput, Turn
from loop.core.policy import HOOK, RUNNER
from loop.store import statetext
from tests.test_engine import NOW, sources, state


def checks(
    passed: int, failed: int, *, first: str = "assert 1 == 2", kind: str = "tests", **more: Any
) -> dict[str, Any]:
    """A validation as a driver hands it over (built by hand: the verification's own shape)."""
    names = [f"tests/test_x.py::test_{i}" for i in range(failed)]
    tests = {"passed": passed, "failed": failed, "failing": names, "reader": "junit"}
    if failed:
        tests["first_error"] = first
    command = {"command": "pytest", "exit_code": 1 if failed else 0, "duration_s": 0.5, "kind": kind}
    data = {"commands": [command], "tests": tests, "tests_pass": not failed, "build_succeeds": None}
    return {**data, "git_clean": True, "ts": "2026-01-09T11:30:00+00:00", **more}


def turn_of(
    loop: LoopState, validation: dict[str, Any] | None, *, changed: bool = False, open_tasks: int = 2
):
    """One runner turn that ended with these checks."""
    failed = validation is not None and validation.get("tests_pass") is False
    stop = StopInput(
        last_text="worked",
        driver="runner",
        turn=Turn(changed=changed, error="raw output that differs" if failed else None),
        verification_failure="$ pytest\n(exit 1)\nFAILED" if failed else None,
        validation=validation,
    )
    result = engine.decide(loop, stop, [], sources(task_file=open_tasks), NOW, RUNNER)
    assert result.state is not None
    return result


def running(**values: Any) -> LoopState:
    return state(status="running", iteration=1, stuck={"tasks": "task_file:2/0/0", "mode": "work"}, **values)


def progress_of(result: Any) -> dict[str, Any]:
    (data,) = [d for kind, d in result.events if kind == "progress"]
    return dict(data)


def test_tests_getting_better_is_progress_even_when_nothing_else_moved() -> None:
    loop = running(limits={"stuck_after": 2, "same_error_after": 2})
    for failed in (5, 4, 3, 2):
        result = turn_of(loop, checks(10 - failed, failed))
        assert result.escalation is None and result.blocked
        loop = result.state
    assert progress_of(result)["moved"] == ["fewer-failing", "more-passing"]
    assert progress_of(result)["tests"]["failed"] == 2
    assert loop.last_validation["tests"]["failed"] == 2 and loop.last_validation["tests_pass"] is False
    assert loop.last_validation["tests_at_start"] == 10


def test_a_workspace_that_changes_while_no_test_gets_better_is_stuck() -> None:
    loop = running(limits={"stuck_after": 2, "same_error_after": 9})
    results = []
    for n in range(3):
        result = turn_of(loop, checks(7, 3, first=f"error {n}"), changed=True)
        results.append(result)
        loop = result.state
        if result.escalation:
            break
    assert len(results) == 3  # the first turn was judged against nothing, the next two were not better
    escalation = results[-1].escalation
    assert escalation is not None and escalation["kind"] == "stuck"
    assert "no test got better" in escalation["reason"]


def test_without_test_counts_a_changed_workspace_is_still_progress() -> None:
    loop = running(limits={"stuck_after": 2})
    for _ in range(4):
        result = turn_of(loop, None, changed=True)
        assert result.escalation is None
        loop = result.state
    assert progress_of(result)["moved"] == [] and "tests" not in progress_of(result)


def test_a_green_suite_leaves_progress_to_the_workspace() -> None:
    loop = running(limits={"stuck_after": 2})
    for _ in range(4):
        result = turn_of(loop, checks(5, 0), changed=True)
        assert result.escalation is None
        loop = result.state


def test_the_same_failing_tests_with_the_same_first_error_escalate_as_the_same_error() -> None:
    loop = running(limits={"same_error_after": 3, "stuck_after": 9})
    for _ in range(3):
        result = turn_of(loop, checks(7, 3, first="assert 1 == 2"))
        loop = result.state
    escalation = result.escalation
    assert escalation is not None and escalation["kind"] == "stuck"
    assert escalation["reason"].startswith("the same error 3 times in a row")
    assert "tests/test_x.py::test_0" in escalation["reason"]


def test_a_different_first_error_is_not_the_same_error() -> None:
    loop = running(limits={"same_error_after": 2, "stuck_after": 9})
    for n in range(4):
        result = turn_of(loop, checks(7, 3, first=f"assert {n} == 2"))
        assert result.escalation is None
        loop = result.state


def test_tests_added_beside_the_same_failures_are_not_stuck_but_still_the_same_error() -> None:
    """The same failing tests and error, but new passing tests each turn: a move, so never
    stuck; yet the failure itself did not move, so it escalates as the same error."""
    loop = running(limits={"same_error_after": 9, "stuck_after": 2})
    for n in range(5):
        result = turn_of(loop, checks(7 + n, 3))
        assert result.escalation is None, result.escalation
        loop = result.state
    assert progress_of(result)["moved"] == ["more-passing", "new-tests"]

    loop = running(limits={"same_error_after": 3, "stuck_after": 9})
    for n in range(3):
        result = turn_of(loop, checks(7 + n, 3))
        loop = result.state
    escalation = result.escalation
    assert escalation is not None and escalation["reason"].startswith("the same error 3 times in a row")


def test_fewer_failing_clears_the_same_error_and_a_new_error_starts_it_over() -> None:
    loop = running(limits={"same_error_after": 3, "stuck_after": 9})
    for passed, failed, first in ((7, 3, "a"), (7, 3, "a"), (8, 2, "a"), (8, 2, "b"), (8, 2, "b")):
        result = turn_of(loop, checks(passed, failed, first=first))
        assert result.escalation is None, result.escalation
        loop = result.state


def broken_suite() -> dict[str, Any]:
    """A suite that cannot even be collected: one error, nothing passing."""
    data = checks(0, 0)
    data.update(tests={"errors": 1, "first_error": "SyntaxError: '(' was never closed"}, tests_pass=False)
    data["commands"][0]["exit_code"] = 2
    return data


def test_breaking_deleting_or_skipping_tests_is_no_move() -> None:
    def counts(passed: int, failed: int, errors: int = 0, skipped: int = 0) -> dict[str, Any]:
        return {"tests": {"passed": passed, "failed": failed, "errors": errors, "skipped": skipped}}

    ten = counts(0, 10)
    assert progress.test_moves(ten, counts(0, 0, errors=1)) == []  # a collection error
    assert progress.test_moves(counts(0, 0, errors=1), ten) == []  # and back
    assert progress.test_moves(ten, counts(0, 9)) == []  # a failing test deleted
    assert progress.test_moves(ten, counts(0, 9, skipped=1)) == []  # or skipped
    assert progress.test_moves(counts(5, 5), counts(4, 4)) == []  # a passing one lost with a failing one
    assert progress.test_moves(counts(2, 10), counts(2, 12)) == []  # new tests that fail
    assert progress.test_moves(ten, counts(1, 9)) == ["fewer-failing", "more-passing"]
    assert progress.test_moves(counts(0, 0, errors=1), counts(1, 9)) == ["more-passing", "new-tests"]


def test_a_suite_broken_and_mended_turn_after_turn_is_stuck() -> None:
    loop = running(limits={"same_error_after": 9, "stuck_after": 3})
    results = []
    for n in range(6):
        result = turn_of(loop, broken_suite() if n % 2 else checks(0, 10), changed=True)
        results.append(result)
        loop = result.state
        if result.escalation:
            break
    assert all(progress_of(r)["moved"] == [] for r in results)
    escalation = results[-1].escalation
    assert len(results) == 4 and escalation is not None and "no test got better" in escalation["reason"]


def test_a_failures_kind_picks_the_next_prompt_with_the_results_shown() -> None:
    result = turn_of(running(), checks(7, 3))
    prompt = result.reason or ""
    assert prompt.startswith("VERIFICATION FAILED - FIX THIS FIRST\n\nFix the failing tests")
    assert "Tests: 7 passed, 3 failed" in prompt
    assert "Failing: tests/test_x.py::test_0, tests/test_x.py::test_1, tests/test_x.py::test_2" in prompt
    assert "First error: assert 1 == 2" in prompt
    assert "| tests: 7 passed, 3 failed" in (result.system_message or "")

    build = checks(0, 0, build_succeeds=False)
    build.update(tests_pass=None, commands=[{"command": "make", "exit_code": 2, "kind": "build"}])
    del build["tests"]
    result = turn_of(running(), build)
    result = engine.decide(
        running(),
        StopInput(
            "x", driver="runner", turn=Turn(changed=True), verification_failure="boom", validation=build
        ),
        [],
        sources(task_file=2),
        NOW,
        RUNNER,
    )
    assert "Fix the build errors first" in (result.reason or "")
    assert progress.failure_kind({"git_clean": False, "tests_pass": True}) == "git"
    assert progress.failure_kind({"commands": [{"exit_code": 1, "kind": "criterion"}]}) == "checks"


def test_uncommitted_work_asks_for_a_commit_in_the_next_prompt() -> None:
    result = turn_of(running(), checks(5, 0, git_clean=False), changed=True)
    prompt = result.reason or ""
    assert "Last checks:\n- Tests: 5 passed\n- Working tree: uncommitted changes" in prompt
    assert "Commit your changes" in prompt


def test_a_stop_in_a_session_journals_its_progress_and_a_task_moved() -> None:
    loop = state(status="running", session_id="s1")
    stop = StopInput(last_text="x", session_id="s1")
    first = engine.decide(loop, stop, [], sources(task_file=3), NOW, HOOK)
    assert progress_of(first)["moved"] == [] and progress_of(first)["tasks"] == {"open": 3, "done": 0}
    second = engine.decide(first.state, stop, [], sources(task_file=2), NOW, HOOK)
    assert progress_of(second)["moved"] == ["tasks"]
    kinds = [kind for kind, _ in second.events]
    assert kinds.index("progress") < kinds.index("blocked")


def test_a_failed_or_cut_short_turn_is_not_judged() -> None:
    for turn in (Turn(failure="crashed", error="crashed"), Turn(interrupted="skip")):
        stop = StopInput("x", driver="runner", turn=turn)
        result = engine.decide(running(), stop, [], sources(task_file=2), NOW, RUNNER)
        assert "progress" not in [kind for kind, _ in result.events]


def test_last_validation_is_written_read_back_and_optional() -> None:
    loop = running()
    loop.last_validation = progress.record(checks(7, 3))
    text = statetext.render(loop)
    back = statetext.parse(text.encode(), "state.md")
    assert back.last_validation == loop.last_validation
    old = text.replace(
        text[text.index("last_validation:") : text.index("\n", text.index("last_validation:")) + 1], ""
    )
    assert "last_validation" not in old
    assert statetext.parse(old.encode(), "state.md").last_validation == {}


def test_one_commands_results_at_a_time_add_up() -> None:
    both = progress.combined([checks(3, 1), checks(2, 2, first="other")])
    assert both["tests"]["passed"] == 5 and both["tests"]["failed"] == 3
    assert both["tests"]["first_error"] == "assert 1 == 2" and both["tests_pass"] is False
    assert len(both["commands"]) == 2
    assert progress.tests_line({"passed": 7, "failed": 3, "errors": 1, "coverage": 81.5}) == (
        "7 passed, 3 failed, 1 error, coverage 81.5%"
    )


def test_a_merge_checked_on_the_loops_branch_is_judged_for_the_workers_too() -> None:
    from loop.core import workflow
    from loop.core.board import Board
    from loop.core.scheduler import keep

    loop = keep(
        LoopState.new("Build it", started_at="2026-01-09T10:00:00+00:00", status="running"), Board(graph="g")
    )
    loop.last_validation = progress.record(checks(4, 4))
    step = workflow.merge_ended(
        loop, "worker-1", sha=None, failure="FAILED", validation=checks(6, 2), now=NOW
    )
    (data,) = [d for kind, d in step.events if kind == "progress"]
    assert data["moved"] == ["fewer-failing", "more-passing"] and data["tasks"] == {"done": 0}
    assert step.state.last_validation["tests"]["failed"] == 2
    unchecked = workflow.merge_ended(loop, "worker-1", sha=None, failure="FAILED", now=NOW)
    assert "progress" not in [kind for kind, _ in unchecked.events]


def test_the_final_validation_block_lines_up_its_values() -> None:
    import re

    from loop.views.summary import validation_lines

    validation = progress.record(checks(7, 0, git_clean=False), {"tests_at_start": 5})
    lines = validation_lines(validation, {"created": 1}, "  Criteria:  1 of 1 checked by a command met")
    block = [line for line in lines if line.startswith("  ")]
    assert len(block) == 4 and "  New tests: 2" in block
    assert {re.match(r"  [A-Za-z ]+:\s+", line).end() for line in block} == {13}  # type: ignore[union-attr]

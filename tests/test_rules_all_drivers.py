"""The rules every driver shares, run for all four (the Stop hook, the runner, its workers, the
Temporal workflow): the same facts give the same outcome, and where the outcome differs it is
because a field of the driver's `DriverPolicy` says so, never its name. A last group fails when a
driver keeps its own copy of a rule that lives in `loop.core`."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from loop.core import engine, scheduler, workflow
from loop.core.model import LoopState, StopInput, Turn, combine
from loop.core.policy import HOOK, POLICIES, RUNNER, TEMPORAL, WORKERS, DriverPolicy, named, run_ends
from loop.core.scheduler import Board, Step, Worker
from tests.test_engine import EMPTY, NOW, report, sources, state

ROOT = Path(__file__).resolve().parent.parent
ALL = [HOOK, RUNNER, WORKERS, TEMPORAL]
BY_NAME = pytest.mark.parametrize("policy", ALL, ids=[p.name for p in ALL])
T0 = "2026-01-09T10:00:00+00:00"
UNCONFIRMED = "the loop names things nobody on this machine confirmed"


def running(**values: object) -> LoopState:
    return state(**{"status": "running", "iteration": 3, **values})


def waiting(kind: str, **more: object) -> LoopState:
    return running(status="paused", waiting_for={"kind": kind, "reason": "why", "since": T0, **more})


def board_state(board: Board, status: str = "running") -> LoopState:
    s = LoopState.new("Build it", started_at=T0, status=status)
    return scheduler.keep(s, board)


def w(name: str, task: str, **values: object) -> Worker:
    return Worker(name, task, ("a.py",), T0, **values)  # type: ignore[arg-type]


# --- the policies ----------------------------------------------------------------------------


def test_one_policy_per_driver_and_the_names_only_name_them() -> None:
    assert sorted(POLICIES) == ["hook", "runner", "temporal", "workers"]
    assert [named(p.name) for p in ALL] == ALL
    assert named(None) is HOOK  # a loop no driver claimed is the session's
    assert not named("some-later-driver").in_session


@BY_NAME
def test_the_documented_differences_are_data(policy: DriverPolicy) -> None:
    """Only the hook runs inside the agent's session; every other driver starts the agent, waits
    for a person and counts the cost; only a Temporal workflow never ends a run by itself."""
    outside = policy is not HOOK
    assert policy.in_session is not outside
    assert policy.starts_agent is outside
    assert policy.waits_for_person is outside
    assert policy.tracks_cost is outside
    assert policy.headless is (policy in (RUNNER, WORKERS))
    assert policy.watched(False).headless is False


# --- (a) a running loop whose values are unconfirmed waits for a person -----------------------


@BY_NAME
def test_an_unconfirmed_running_loop_waits_for_a_person(policy: DriverPolicy) -> None:
    listed = ("prompt: something else", "notification target: cmd:evil")
    held = engine.hold_unconfirmed(running(), listed, NOW)
    assert held.state is not None and held.state.status == "paused"
    assert held.escalation is not None and held.escalation["kind"] == "unconfirmed"
    assert held.escalation["reason"].startswith(UNCONFIRMED)
    assert engine.hold_unconfirmed(waiting("pause"), listed, NOW).state is None  # nothing to stop
    assert engine.hold_unconfirmed(running(), (), NOW).state is None

    stop = StopInput(last_text=None, driver=policy.name, unconfirmed=listed)
    decided = engine.decide(running(), stop, [], None, NOW, policy)
    if policy.in_session:  # the session's Stop: nothing of the loop is driven, nothing written
        assert decided.state is None and decided.system_message is not None
        assert "nobody on this machine confirmed" in decided.system_message
        assert not engine.needs_sources(running(), stop, [], policy)
    else:
        assert decided.state is not None and decided.escalation == held.escalation
        assert decided.state.waiting_for == held.state.waiting_for

    step = workflow.unconfirmed(board_state(Board(graph="g")), listed, NOW)
    assert step is not None and step.state.waiting_for == held.state.waiting_for


# --- (b) a run nobody watches ends on an escalation or a question ------------------------------


ENDINGS = [
    ("question", waiting("question", question="SQLite?"), ("question", "why")),
    ("escalation", waiting("escalation", escalation="stuck"), ("escalated", "why: needs a person")),
    ("limit", waiting("escalation", escalation="max-iterations"), ("limit", "why: needs a person")),
    ("pause", waiting("pause"), None),
    ("usage-limit", running(waiting_for={"kind": "usage-limit", "reason": "why", "since": T0}), None),
    ("running", running(), None),
]


@BY_NAME
@pytest.mark.parametrize(("case", "loop", "expected"), ENDINGS, ids=[c for c, _, _ in ENDINGS])
def test_a_headless_run_ends_when_the_loop_waits_for_a_person(
    policy: DriverPolicy, case: str, loop: LoopState, expected: tuple[str, str] | None
) -> None:
    assert run_ends(policy, loop) == (expected if policy.headless else None)
    assert run_ends(policy.watched(False), loop) is None
    assert run_ends(policy.watched(True), loop) == expected


@BY_NAME
def test_a_headless_run_that_starts_on_a_waiting_loop_or_with_only_questions_ends(
    policy: DriverPolicy,
) -> None:
    at_start = run_ends(policy.watched(True), waiting("pause"), at_start=True)
    assert at_start == ("paused", "still waiting for a person: why")
    assert run_ends(policy.watched(True), running(), at_start=True) is None
    asked = run_ends(policy, running(), asking="SQLite?")
    assert asked == (("question", "a worker asks: SQLite?") if policy.headless else None)


def test_only_a_worker_asking_with_nothing_else_moving_is_a_question_for_the_run() -> None:
    asking = w("worker-1", "1", status=scheduler.QUESTION, question="SQLite?")
    held = w("worker-2", "2", status=scheduler.HELD)
    step = scheduler.step_of(board_state(Board(graph="g", workers=(asking, held))))
    assert scheduler.only_asking(step, running=False) == "SQLite?"
    assert scheduler.only_asking(step, running=True) is None
    busy = scheduler.step_of(board_state(Board(graph="g", workers=(asking, w("worker-3", "3")))))
    assert scheduler.only_asking(busy, running=False) is None  # worker-3 may still move


# --- (c) a turn with no audit configured is approved -----------------------------------------


@BY_NAME
@pytest.mark.parametrize("audit", [None, "", "pytest -q"])
def test_a_turn_with_no_audit_configured_is_approved(policy: DriverPolicy, audit: str | None) -> None:
    board = Board(graph="g", audit=audit, isolation="worktree", loop_branch="main", serial=1)
    worker = w("worker-1", "1", branch="loopdeck/L/1")
    s = board_state(replace(board, workers=(worker,)))
    step = workflow.turn(
        s,
        Turn(),
        worker="worker-1",
        task="1",
        changed=True,
        asked=None,
        end=scheduler.TurnEnd("worker-1", "", "done", changed=("a.py",)),
        now=NOW,
    )
    assert scheduler.audit_for(step.board) == (audit or None)
    if audit:  # the driver runs the audit and reports its word
        assert step.board.workers[0].status == scheduler.AUDITING
        assert step.board.queue == ()
    else:  # approved by the rules themselves: no driver decides it
        assert step.board.workers[0].status == scheduler.QUEUED
        assert step.board.queue == ("worker-1",)
        assert ("audit-approved", {"worker": "worker-1", "task": "1"}) in step.events


# --- (d) which branch merges next, and when ----------------------------------------------------


QUEUED = w("worker-1", "1", status=scheduler.QUEUED, branch="loopdeck/L/1")
NO_BRANCH = w("worker-2", "2", status=scheduler.QUEUED)
MERGES = [
    ("running", (QUEUED, NO_BRANCH), ("worker-1", "worker-2"), "worker-1"),
    ("paused", (QUEUED,), ("worker-1",), "worker-1"),  # a pause holds new turns, not an approved merge
    ("stopped", (QUEUED,), ("worker-1",), None),
    ("running", (QUEUED,), (), None),
    ("running", (NO_BRANCH,), ("worker-2",), None),
]


@BY_NAME
@pytest.mark.parametrize(("status", "workers", "queue", "expected"), MERGES)
def test_the_queues_first_branch_merges_while_the_loop_runs_or_pauses(
    policy: DriverPolicy,
    status: str,
    workers: tuple[Worker, ...],
    queue: tuple[str, ...],
    expected: str | None,
) -> None:
    s = board_state(Board(graph="g", workers=workers, queue=queue, isolation="worktree"), status)
    worker = scheduler.next_merge(s)
    assert (worker.name if worker is not None else None) == expected


# --- (e) when a scheduling cycle runs ----------------------------------------------------------


CYCLES = [
    ("running", True, False, True),
    ("running", False, True, True),
    ("running", False, False, False),
    ("paused", True, True, False),
    ("stopped", True, True, False),
]


@BY_NAME
@pytest.mark.parametrize(("status", "changed", "idle", "expected"), CYCLES)
def test_a_cycle_runs_on_a_change_or_when_idle_while_the_loop_runs(
    policy: DriverPolicy, status: str, changed: bool, idle: bool, expected: bool
) -> None:
    assert scheduler.cycle_due(board_state(Board(graph="g"), status), changed, idle) is expected


# --- the Stop's differences, read from the policy -----------------------------------------------


def decided(policy: DriverPolicy, loop: LoopState, turn: Turn | None = None, text: str | None = None):
    stop = StopInput(last_text=text, driver=policy.name, session_id="s1", turn=turn)
    return engine.decide(loop, stop, [], sources(task_file=2), NOW, policy)


@BY_NAME
def test_past_the_iteration_limit_a_driver_that_waits_for_a_person_waits(policy: DriverPolicy) -> None:
    result = decided(policy, running(max_iterations=3), Turn(changed=True))
    assert result.escalation is not None and result.escalation["kind"] == "max-iterations"
    assert result.state is not None
    if policy.waits_for_person:
        assert result.action == "allow" and result.state.status == "paused"
    else:  # in a session, the escalation is said in the prompt and the session goes on
        assert result.blocked and "ESCALATION" in (result.system_message or "")


@BY_NAME
def test_a_spent_budget_stops_a_driver_that_counts_the_cost(policy: DriverPolicy) -> None:
    loop = running(limits={"max_cost_micro_usd": 100}, usage={"cost_micro_usd": 100})
    result = decided(policy, loop, Turn(changed=True))
    assert result.state is not None
    assert (result.state.waiting_for or {}).get("escalation") == ("max-cost" if policy.tracks_cost else None)
    assert result.blocked is not policy.tracks_cost


@BY_NAME
def test_a_driver_that_starts_the_agent_sends_the_loops_own_prompt_first(policy: DriverPolicy) -> None:
    result = engine.decide(
        state(status="running"), StopInput(None, driver=policy.name, session_id="s1"), [], EMPTY, NOW, policy
    )
    first = result.blocked and "first turn" in (result.system_message or "")
    assert first is policy.starts_agent


@BY_NAME
def test_the_session_is_bound_only_by_a_driver_inside_it(policy: DriverPolicy) -> None:
    result = decided(policy, running(pid=4242, driver="runner"), text="working")
    assert result.state is not None
    assert (result.state.session_id == "s1") is policy.in_session
    assert (result.state.pid is None) is policy.in_session  # the other driver's process is forgotten
    assert result.state.driver == policy.name  # the name, for people to read


@BY_NAME
def test_unreadable_sources_make_a_driver_that_waits_for_a_person_wait(policy: DriverPolicy) -> None:
    unreadable = combine([report("task_file", available=False, error="gone")])
    stop = StopInput(last_text="x", driver=policy.name, session_id="s1", turn=Turn(changed=True))
    result = engine.decide(running(), stop, [], unreadable, NOW, policy)
    assert result.escalation is not None and result.escalation["kind"] == "uncertain-sources"
    assert result.blocked is not policy.waits_for_person


PROGRESS = [
    # (case, tests before, tests now, failing turns, moved)
    ("fewer failing", (7, 3), (8, 2), True, ["fewer-failing", "more-passing"]),
    ("new tests", (7, 3), (9, 3), True, ["more-passing", "new-tests"]),
    ("no better", (7, 3), (7, 3), True, []),
    ("all green", (7, 3), (10, 0), False, ["fewer-failing", "more-passing"]),
]


@BY_NAME
@pytest.mark.parametrize(
    ("case", "before", "now", "failing", "moved"), PROGRESS, ids=[c[0] for c in PROGRESS]
)
def test_every_driver_judges_a_turns_progress_on_the_tests_and_journals_it(
    policy: DriverPolicy,
    case: str,
    before: tuple[int, int],
    now: tuple[int, int],
    failing: bool,
    moved: list[str],
) -> None:
    """The engine, not the driver, judges the turn: the same checks give every driver the same
    `progress` event and the same `last_validation`; the one difference is data (a driver that
    starts the agent judges the turn it ran, in a session every Stop is one)."""

    def checks(passed: int, failed: int) -> dict[str, object]:
        tests = {"passed": passed, "failed": failed, "failing": [f"t{i}" for i in range(failed)]}
        return {"tests": tests, "tests_pass": not failed, "build_succeeds": None, "git_clean": True, "ts": T0}

    loop = running(last_validation=checks(*before), stuck={"tasks": "task_file:2/0/0", "mode": "work"})
    turn = None if not policy.starts_agent else Turn(changed=False)
    stop = StopInput(
        last_text="x",
        driver=policy.name,
        session_id="s1",
        turn=turn,
        verification_failure="FAILED" if failing else None,
        validation=checks(*now),
    )
    result = engine.decide(loop, stop, [], sources(task_file=2), NOW, policy)
    (data,) = [d for kind, d in result.events if kind == "progress"]
    assert data["moved"] == moved and data["tests"]["passed"] == now[0]
    assert data["tasks"] == {"open": 2, "done": 0}
    assert result.state is not None and result.state.last_validation["tests"]["failed"] == now[1]


# --- no copies in the drivers ------------------------------------------------------------------

DRIVERS = [
    "loop/drivers/hook.py",
    "loop/drivers/runner.py",
    "loop/drivers/parallel.py",
    "loop/drivers/claim.py",
    "loop/drivers/merging.py",
    "loop/drivers/session.py",
    "loop/drivers/turn.py",
    "loop/drivers/verification.py",
    "loop/temporal/workflow.py",
    "loop/temporal/activities.py",
]


def copies(source: str) -> list[str]:
    """The shared rules' tell-tale shapes in a driver's source: each is decided in `loop.core`."""
    found = ["(a) the unconfirmed escalation's sentence"] if UNCONFIRMED in source else []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If):
            read = {n.attr for n in ast.walk(node.test) if isinstance(n, ast.Attribute)}
            named = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            if "headless" in read and read & {"waiting_kind", "waiting_for"}:
                found.append(f"(b) a wait that ends a headless run, line {node.lineno}")
            if "changed" in named and "status" in read:
                found.append(f"(e) when a scheduling cycle runs, line {node.lineno}")
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "audit"
            and isinstance(node.value, ast.Name)
            and node.value.id == "board"
        ):
            found.append(f"(c) whether a turn is audited, line {node.lineno}")
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Call)
            and getattr(node.left.func, "attr", None) == "audit_for"
        ):
            found.append(f"(c) whether a turn is audited, line {node.lineno}")
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr == "status"
        ):
            words = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant)}
            if words >= {"running", "paused"}:
                found.append(f"(d) when merges may run, line {node.lineno}")
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "queue"
        ):
            found.append(f"(d) which branch merges next, line {node.lineno}")
    return sorted(found)


@pytest.mark.parametrize("path", DRIVERS)
def test_no_driver_keeps_a_copy_of_a_shared_rule(path: str) -> None:
    assert copies((ROOT / path).read_text()) == []


def test_the_copy_check_finds_each_copy_the_drivers_once_held() -> None:
    held = """
if state.status == "paused" and self.options.headless and state.waiting_kind in ("escalation", "question"):
    pass
reason = f"the loop names things nobody on this machine confirmed: {listed}"
if not board.audit or worker.branch is None:
    pass
if state is None or state.status not in ("running", "paused"):
    pass
worker = board.worker(board.queue[0])
if (changed or idle) and state.status == "running":
    pass
"""
    assert [line[:3] for line in copies(held)] == ["(a)", "(b)", "(c)", "(d)", "(d)", "(e)"]
    assert copies("if after.waiting_kind == 'question' and not options.headless_hint:\n    pass\n") == []


def test_the_engine_never_asks_who_called_it() -> None:
    pattern = re.compile(r"driver ?(==|!=| in )")
    hits = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "loop" / "core").glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []


def test_the_unconfirmed_sentence_lives_in_the_core_only() -> None:
    holders = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "loop").rglob("*.py")
        if UNCONFIRMED in path.read_text()
    )
    assert holders == ["loop/core/transitions.py"]


def test_a_step_keeps_the_state_the_rules_left() -> None:
    """`workflow.unconfirmed` leaves a loop that is not running as it is: no step to carry out."""
    assert workflow.unconfirmed(board_state(Board(graph="g"), "paused"), ("x",), NOW) is None
    assert isinstance(workflow.unconfirmed(board_state(Board(graph="g")), ("x",), NOW), Step)

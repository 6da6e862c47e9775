"""The per-iteration series every picture draws (`loop.views.progress`)."""

from __future__ import annotations

from loop.core.events import message
from loop.core.model import JournalEvent, spent_of
from loop.views.progress import series


def event(kind: str, n: int | None, **data: object) -> JournalEvent:
    return JournalEvent("2026-11-28T00:00:00.000Z", kind, n, data)


def test_points_per_iteration_from_progress_and_turn_events() -> None:
    events = [
        event("iteration-completed", 1, duration_s=2.5, cost_usd=0.25),
        event("progress", 1, tasks={"open": 3, "done": 1}, tests={"passed": 0, "failed": 9, "errors": 1}),
        event("iteration-completed", 2, duration_s=4.0),
        event("progress", 2, tasks={"open": 2, "done": 2}, tests={"passed": 1, "failed": 9}),
        event("iteration-completed", 3, duration_s=1.0, cost_usd=0.5),
    ]
    points = series(events).points
    assert [p.iteration for p in points] == [1, 2, 3]
    assert [p.tests_failed for p in points] == [10, 9, None]
    assert [p.tests_passed for p in points] == [0, 1, None]
    assert [p.tasks_done for p in points] == [1, 2, None]
    assert [p.cost_usd for p in points] == [0.25, 0.25, 0.75]
    assert [p.duration_s for p in points] == [2.5, 4.0, 1.0]


def test_bad_values_and_events_without_an_iteration_are_passed_over() -> None:
    events = [
        event("progress", None, tasks={"open": 1}),
        event("progress", 1, tasks="many", tests={"passed": -1, "failed": True}),
        event("iteration-completed", 1, duration_s="long", cost_usd=None),
    ]
    built = series(events)
    assert [p.iteration for p in built.points] == [1]
    point = built.points[0]
    assert (point.tasks_open, point.tests_passed, point.tests_failed, point.duration_s) == (
        None,
        None,
        None,
        None,
    )
    assert not built.has_tests
    assert not built.known("cost_usd")


def test_a_loop_that_names_no_task_has_no_task_figures() -> None:
    built = series([event("progress", 1, tasks={"open": 0, "done": 0}, tests={"passed": 1, "failed": 0})])
    assert not built.known("tasks_open") and not built.known("tasks_done")
    assert built.points[0].tests_passed == 1


def test_a_loop_of_workers_draws_its_longest_turn_and_its_cost_per_iteration() -> None:
    """Workers' turns end several to an iteration: the iteration holds the longest, and each
    turn's cost adds up."""
    events = [
        event("worker-ended", 1, worker="worker-1", duration_s=12.0, cost_usd=0.5),
        event("worker-ended", 1, worker="worker-2", duration_s=30.0, cost_usd=0.25),
        event("worker-ended", 1, worker="worker-3", duration_s=20.0),
        event("progress", 2, tasks={"done": 2}),
        event("worker-ended", 3, worker="worker-1", duration_s=5.0, cost_usd=1.0),
    ]
    points = series(events).points
    assert [p.duration_s for p in points] == [30.0, None, 5.0]
    assert [p.cost_usd for p in points] == [0.75, None, 1.75]


def test_a_workers_turn_says_its_tokens_and_cost_in_the_journal() -> None:
    spent = spent_of({"input_tokens": 2000, "output_tokens": 150, "cost_micro_usd": 4200})
    ended = event("worker-ended", 4, worker="worker-1", turn=1, task="3", exit_code=0, duration_s=12, **spent)
    assert message(ended) == "worker-1 ended turn 1 on task 3 (exit 0, 12s; 2,150 tokens, $0.0042)"
    assert message(event("worker-ended", 4, worker="w", turn=1, task="3", exit_code=0, duration_s=12)) == (
        "w ended turn 1 on task 3 (exit 0, 12s)"
    )

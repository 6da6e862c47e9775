"""What the loop does with the host's word on a pull request (`loop.core.pulls.answer`): decided
in the core, with no I/O; the driver only carries it out."""

from __future__ import annotations

from loop.core import pulls
from loop.core.pulls import Answer, Verdict, answer

URL = "https://github.localhost/o/r/pull/7"


def test_nothing_is_done_while_the_host_has_not_said_anything() -> None:
    assert answer(Verdict(pulls.WAIT), "worker-1", "3", URL) is None


def test_a_failing_check_or_a_change_request_is_the_tasks_next_turn_journaled_first() -> None:
    todo = answer(Verdict(pulls.REWORK, "CHECKS FAILED", {"checks": ["ci"]}), "worker-1", "3", URL)
    assert todo == Answer(
        False,
        "CHECKS FAILED",
        event=("pr-rework", {"worker": "worker-1", "task": "3", "url": URL, "checks": ["ci"]}),
    )


def test_a_pull_request_closed_on_the_host_needs_a_person() -> None:
    todo = answer(Verdict(pulls.PERSON, f"its pull request {URL} was closed"), "worker-1", "3", URL)
    assert todo is not None and not todo.approved and todo.event is None
    assert todo.problem == f"task 3: its pull request {URL} was closed"


def test_green_merged_or_conflicting_is_taken_and_landed_by_the_driver() -> None:
    assert answer(Verdict(pulls.LAND), "w", "3", URL) == Answer(True)
    assert answer(Verdict(pulls.MERGED), "w", "3", URL) == Answer(True, merged_already=True)
    assert answer(Verdict(pulls.CONFLICT), "w", "3", URL) == Answer(True, conflict=True)

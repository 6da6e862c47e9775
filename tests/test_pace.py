"""When the summary panels are redrawn: at once for a change a person steers by or a loop at a
person's pace, paced while a loop races, never for a snapshot that shows nothing new."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from loop.store.paths import Workspace
from loop.views.snapshot import Snapshot, read
from tools import screenshots
from tui.pace import BURST, EVERY_S, LATE_S, SummaryPace


class Clock:
    """A clock moved by hand, and the timers set on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((self.now + delay, callback))

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [t for t in self.timers if t[0] <= self.now]
        self.timers = [t for t in self.timers if t[0] > self.now]
        for _at, callback in due:
            callback()


def _snapshot(tmp_path: Path) -> Snapshot:
    ws = screenshots.SCENARIOS["running"](tmp_path / "running")
    assert isinstance(ws, Workspace)
    snap = read(ws)
    assert snap.loop is not None
    return snap


def _at(snap: Snapshot, iteration: int, status: str | None = None) -> Snapshot:
    assert snap.loop is not None
    loop = dataclasses.replace(snap.loop, iteration=iteration, status=status or snap.loop.status)
    return dataclasses.replace(snap, loop=loop)


def test_the_same_view_draws_nothing_and_a_race_is_paced(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path)
    clock = Clock()
    shown: list[Snapshot | None] = []
    pace = SummaryPace(shown.append, clock.later, lambda: clock.now)
    pace.offer(snap)
    pace.offer(snap)
    pace.offer(dataclasses.replace(snap))  # equal, not the same object: still nothing new
    assert shown == [snap]
    for n in range(1, 40):  # five a second, for eight seconds
        clock.advance(0.2)
        pace.offer(_at(snap, 100 + n))
    assert len(shown) < 1 + BURST + 8 / EVERY_S + 1  # not one frame per iteration
    clock.advance(LATE_S)
    assert shown[-1] is not None and shown[-1].loop is not None and shown[-1].loop.iteration == 139


def test_what_a_person_steers_by_is_shown_at_once(tmp_path: Path) -> None:
    snap = _snapshot(tmp_path)
    clock = Clock()
    shown: list[Snapshot | None] = []
    pace = SummaryPace(shown.append, clock.later, lambda: clock.now)
    for n in range(1, 10):  # racing: from here on, changes are held back
        clock.advance(0.05)
        pace.offer(_at(snap, 100 + n))
    held = len(shown)
    paused = _at(snap, 110, status="paused")
    pace.offer(paused)
    assert len(shown) == held + 1 and shown[-1] is paused
    clock.advance(10)  # a loop at a person's pace: each change at once
    for n in range(3):
        clock.advance(2.0)
        step = _at(snap, 120 + n, status="paused")
        pace.offer(step)
        assert shown[-1] is step


def test_a_race_shows_the_summaries_with_the_snapshots_that_come(tmp_path: Path) -> None:
    """While a loop races, the summaries change in the frame a new snapshot draws anyway (the
    journal's), not in a frame of their own from a timer; a snapshot held back when the loop
    goes quiet is still shown, a moment later."""
    snap = _snapshot(tmp_path)
    clock = Clock()
    shown: list[tuple[Snapshot | None, bool]] = []
    offering = False
    pace = SummaryPace(lambda s: shown.append((s, offering)), clock.later, lambda: clock.now)
    for n in range(1, 40):  # five a second, for eight seconds
        clock.advance(0.2)
        offering = True
        pace.offer(_at(snap, 100 + n))
        offering = False
    assert all(with_a_snapshot for _s, with_a_snapshot in shown)
    assert 8 / (EVERY_S + 0.2) - 1 <= len(shown) < 1 + BURST + 8 / EVERY_S + 1
    last = shown[-1][0]
    assert last is not None and last.loop is not None and last.loop.iteration < 139
    clock.advance(LATE_S)  # the loop went quiet: the newest is shown all the same
    last = shown[-1][0]
    assert last is not None and last.loop is not None and last.loop.iteration == 139


def test_a_loop_at_five_a_second_redraws_them_once_a_second_one_at_one_a_second_each_time(
    tmp_path: Path,
) -> None:
    snap = _snapshot(tmp_path)

    def redraws(per_second: int) -> int:
        """How many times the summaries are redrawn in eight seconds at this pace."""
        clock = Clock()
        shown: list[Snapshot | None] = []
        pace = SummaryPace(shown.append, clock.later, lambda: clock.now)
        for n in range(per_second * 8):
            clock.advance(1 / per_second)
            pace.offer(_at(snap, 100 + n))
        return len(shown)

    assert redraws(5) <= 8 + BURST + 2
    assert redraws(1) == 8, "at one iteration a second, each one at once"

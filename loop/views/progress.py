"""A loop's progress per iteration, read from its journal: the one series every picture draws.

The monitor's Progress view, `serve`, the fleet's sparklines and `loopdeck report` all ask the
same questions (did the tasks go down, did the tests get better, what did it cost, how long did
the turns take), so they read the answers here once, from the events every driver journals:
`progress` (the engine's judgement of a turn: task counts, test counts),
`iteration-completed` (the turn's duration and cost) and `worker-ended` (a worker's turn's: an
iteration of a loop of workers holds the longest turn that ended in it, and their cost).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loop.agents.output import as_float
from loop.core.model import JournalEvent

KINDS = frozenset({"progress", "iteration-completed", "worker-ended"})
"""The events the series is made of; the others are passed over."""
TURNS = frozenset({"iteration-completed", "worker-ended"})
"""The events of a turn's end: its duration and cost."""


@dataclass(slots=True)
class Point:
    """One iteration's figures; None where the journal does not say."""

    iteration: int
    tasks_open: int | None = None
    tasks_done: int | None = None
    tests_passed: int | None = None
    tests_failed: int | None = None
    cost_usd: float | None = None
    """What the loop had cost by the end of this iteration (cumulative)."""
    duration_s: float | None = None
    """How long this iteration's agent turn took."""


@dataclass(slots=True)
class Series:
    """The points in iteration order."""

    points: list[Point] = field(default_factory=list)

    def column(self, name: str) -> list[float | None]:
        """One figure across the iterations (None where unknown)."""
        return [getattr(point, name) for point in self.points]

    def known(self, name: str) -> bool:
        """Whether any iteration has this figure: a chart without it is not drawn."""
        return any(value is not None for value in self.column(name))

    @property
    def has_tests(self) -> bool:
        return self.known("tests_passed") or self.known("tests_failed")


def series(events: Iterable[JournalEvent]) -> Series:
    """The loop's per-iteration figures from its journal events (any order of kinds; events
    without an iteration are passed over)."""
    points: dict[int, Point] = {}
    spent = 0.0
    costed = False
    for event in events:
        n = event.iteration
        if not isinstance(n, int) or isinstance(n, bool):
            continue
        if event.kind == "progress":
            point = points.setdefault(n, Point(n))
            tasks = _mapping(event.data.get("tasks"))
            if any(tasks.get(key) for key in ("open", "done")):  # all zero: the loop names no task
                point.tasks_open = _int(tasks.get("open"), point.tasks_open)
                point.tasks_done = _int(tasks.get("done"), point.tasks_done)
            tests = _mapping(event.data.get("tests"))
            if tests:
                point.tests_passed = _int(tests.get("passed"), point.tests_passed)
                failed = _int(tests.get("failed"), None)
                errors = _int(tests.get("errors"), None)
                if failed is not None or errors is not None:
                    point.tests_failed = (failed or 0) + (errors or 0)
        elif event.kind in TURNS:
            point = points.setdefault(n, Point(n))
            took = _float(event.data.get("duration_s"), None)
            if took is not None and (event.kind == "iteration-completed" or took > (point.duration_s or 0)):
                point.duration_s = took
            cost = _float(event.data.get("cost_usd"), None)
            if cost is not None and math.isfinite(spent + cost):
                spent += cost
                costed = True
            if costed:
                point.cost_usd = round(spent, 6)
    return Series([points[n] for n in sorted(points)])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any, default: int | None) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def _float(value: Any, default: float | None) -> float | None:
    """A figure the journal says, when it is a finite number of 0 or more (a chart cannot draw
    JSON's `Infinity` or `NaN`)."""
    number = as_float(value)
    return default if number is None else number

"""What a report holds: the loop's figures and lists, already redacted where they are text.

`gather` fills a `LoopReport`; `html` and `markdown` only draw it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from loop.core.errors import LoopdeckError
from loop.store.paths import loop_folder_name
from loop.views.progress import Series


class ReportError(LoopdeckError):
    """No loop to report on (said in one line)."""


@dataclass(slots=True)
class TaskRow:
    """One task's outcome: how many turns it took, its commits, cost and checks."""

    name: str
    outcome: str = "?"
    turns: int = 0
    commits: int = 0
    cost_usd: float | None = None
    checks_passed: int = 0
    checks_failed: int = 0
    problems: Counter[str] = field(default_factory=Counter)
    """What went wrong on it, by kind (a failed check, an audit rejection, a merge conflict…)."""
    workers: list[str] = field(default_factory=list)
    pull: str = ""
    """Its pull request's address (`run --pr`), linked from the report."""

    @property
    def failures(self) -> int:
        return sum(self.problems.values())

    def add_cost(self, cost: object) -> None:
        """Add a turn's cost as its event recorded it; a missing or odd value adds nothing."""
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost_usd = (self.cost_usd or 0.0) + float(cost)


@dataclass(slots=True)
class Question:
    iteration: int | None
    ts: str
    text: str
    answer: str | None = None
    worker: str | None = None


@dataclass(slots=True)
class Escalation:
    iteration: int | None
    ts: str
    reason: str
    kind: str
    open: bool = False


@dataclass(slots=True)
class Check:
    """One verification command across the loop: its runs and its last result."""

    command: str
    runs: int = 0
    failed: int = 0
    last_passed: bool = True
    last_exit: int | None = None
    last_iteration: int | None = None
    tail: str = ""
    tests: dict[str, Any] | None = None


@dataclass(slots=True)
class Moment:
    ts: str
    iteration: int | None
    text: str
    tone: str = ""
    """`bad`, `good` or "" (how the page colours it)."""


@dataclass(slots=True)
class LoopReport:
    """Everything a report shows, already redacted where it is text."""

    workspace: str
    title: str
    loop_id: str
    started_at: str
    driver: str
    where: str
    """`live`, `archived`, or `journal` (no state here: a loop driven elsewhere)."""
    outcome: str
    reason: str
    iterations: int
    max_iterations: int
    duration_s: float | None
    cost_usd: float | None
    series: Series
    durations: list[tuple[str, float]]
    """Each turn's duration, labelled (an iteration, or a worker's task and turn)."""
    tasks: list[TaskRow]
    questions: list[Question]
    escalations: list[Escalation]
    checks: list[Check]
    timeline: list[Moment]
    left_out: int
    """Timeline events not shown (between its head and its tail)."""
    attention: list[str]
    still_failing: list[str]
    commits: int
    generated_at: str
    folder: str | None = None
    journal_found: bool = True
    parallel: bool = False
    validation: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The loop's folder name (its start and id), for a default file name."""
        return loop_folder_name(self.started_at, self.loop_id)


def money(value: float | None) -> str:
    """`$1.23`, `$0.0042` under a cent, or that nobody reported it."""
    if value is None:
        return "not reported"
    return f"${value:.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"

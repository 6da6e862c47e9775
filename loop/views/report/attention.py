"""What a person should look at first in a report, most urgent first."""

from __future__ import annotations

from loop.core.model import JournalEvent
from loop.core.redact import redact
from loop.views.report.model import LoopReport


def attention(report: LoopReport, events: list[JournalEvent]) -> list[str]:
    """What a person should look at first, most urgent first (plain text, redacted)."""
    items: list[str] = []
    for escalation in report.escalations:
        if escalation.open:
            items.append(
                f"An escalation waits for you (iteration {escalation.iteration}): {escalation.reason}"
            )
    for question in report.questions:
        if question.answer is None:
            who = question.worker or "the agent"
            items.append(f"A question from {who} waits for an answer: {question.text}")
    if report.outcome in ("failed", "limit"):
        items.append(
            f"The loop {'failed' if report.outcome == 'failed' else 'hit its limit'}: {report.reason}"
        )
    for check in report.checks:
        if not check.last_passed:
            items.append(
                f"Verification is red: `{check.command}` failed (exit {check.last_exit}) at iteration "
                f"{check.last_iteration}" + (f": {_last_line(check.tail)}" if check.tail.strip() else "")
            )
    if report.still_failing:
        shown = ", ".join(report.still_failing[:5])
        more = f" and {len(report.still_failing) - 5} more" if len(report.still_failing) > 5 else ""
        items.append(f"{len(report.still_failing)} test(s) still fail: {shown}{more}")
    worst = max(report.tasks, key=lambda r: (r.failures, r.turns), default=None)
    if worst is not None and worst.failures:
        what = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in worst.problems.most_common())
        items.append(f'The task that failed most: "{worst.name}" ({what} in {worst.turns} turn(s))')
    longest = max(report.tasks, key=lambda r: r.turns, default=None)
    if longest is not None and longest.turns >= 3 and longest is not worst:
        items.append(f'The task that took the most turns: "{longest.name}" ({longest.turns})')
    if report.validation.get("git_clean") is False:
        items.append(
            "The working tree has uncommitted changes (at the last checks): review them, then commit"
        )
    failures = sum(1 for e in events if e.kind == "agent-failed")
    if failures:
        items.append(f"The agent failed {failures} time(s) (the timeline says why)")
    if not report.journal_found and report.where == "archived":
        items.append("The journal no longer holds this loop's events: the figures come from its archive only")
    return [redact(item) for item in items]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= 200 else line[:197] + "…"

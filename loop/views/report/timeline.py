"""The loop over time: its notable events (the first and the last of a long night) and each
turn's duration."""

from __future__ import annotations

import itertools

from loop.core.events import message
from loop.core.model import JournalEvent
from loop.core.redact import redact
from loop.core.timeutil import parse_iso
from loop.views.progress import Series
from loop.views.report.model import Moment

TIMELINE_HEAD = 40
TIMELINE_TAIL = 260
"""The timeline keeps the loop's first and last events when it has more than both: a night of
iterations is thousands of lines, and the start and the end are what people read."""

TIMELINE_KINDS = frozenset(
    {
        "loop-started", "runner-started", "iteration-started", "verification-failed", "commit",
        "escalation", "question", "worker-question", "answered", "paused", "resumed", "stopped",
        "completed", "failed", "agent-failed", "agent-switched", "usage-limit", "limit-lifted",
        "verification-mode", "verification-interrupted", "task-skipped", "task-completed",
        "task-merged", "merge-conflict", "merge-rejected", "merge-flaky", "audit-rejected",
        "worker-replaced", "worker-strayed", "worker-stopped", "sandbox-refused", "permission-denied",
        "command-applied", "warning", "error", "archived", "summary-kept", "restored",
        "state-rebuilt",
    }
)  # fmt: skip
BAD_KINDS = frozenset(
    {
        "verification-failed", "escalation", "failed", "agent-failed", "merge-conflict",
        "merge-rejected", "audit-rejected", "worker-replaced", "worker-strayed", "sandbox-refused",
        "permission-denied", "error", "warning", "usage-limit",
    }
)  # fmt: skip
GOOD_KINDS = frozenset({"completed", "commit", "task-completed", "task-merged", "answered", "resumed"})


def timeline(events: list[JournalEvent]) -> tuple[list[Moment], int]:
    """The notable events as lines, and how many were left out between the head and the tail."""
    shown = [e for e in events if e.kind in TIMELINE_KINDS]
    left_out = 0
    if len(shown) > TIMELINE_HEAD + TIMELINE_TAIL:
        left_out = len(shown) - TIMELINE_HEAD - TIMELINE_TAIL
        shown = shown[:TIMELINE_HEAD] + shown[-TIMELINE_TAIL:]
    moments = []
    for event in shown:
        text = message(event)
        if event.kind == "iteration-started" and event.data.get("task"):
            text += f': "{event.data["task"]}"'
        tone = "bad" if event.kind in BAD_KINDS else "good" if event.kind in GOOD_KINDS else ""
        moments.append(Moment(event.ts, event.iteration, redact(text), tone))
    return moments, left_out


def durations(events: list[JournalEvent], figures: Series) -> list[tuple[str, float]]:
    """Each turn's duration: the workers' turns (each its own, where the series holds the
    longest of an iteration), else the iterations' own (the runner), else the time between
    the hook's turns."""
    turns = [
        e for e in events if e.kind == "worker-ended" and isinstance(e.data.get("duration_s"), int | float)
    ]
    if turns:
        return [
            (f"{e.data.get('task', '?')}·{e.data.get('turn', '?')}", float(e.data["duration_s"]))
            for e in turns
        ]
    if figures.known("duration_s"):
        return [(str(p.iteration), p.duration_s) for p in figures.points if p.duration_s is not None]
    stamps = [(e.iteration, parse_iso(e.ts)) for e in events if e.kind == "blocked"]
    out = []
    for (_, before), (n, after) in itertools.pairwise(stamps):
        if before and after:
            out.append((str((n or 1) - 1), (after - before).total_seconds()))
    return out

"""A loop read into the figures and lists its report shows, whatever drove it.

The journal is the one record every driver keeps, so nearly everything comes from it (`find`
picks the loop and its events). The state (live, or the archive's copy) and the archive's
summary add how it ended, its cost and its tasks by name. Nothing here asks the network: the
task sources are counted without GitHub.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from loop.core.errors import LoopdeckError
from loop.core.model import JournalEvent, LoopState, replace
from loop.core.redact import redact
from loop.core.timeutil import iso_s, parse_iso, utcnow
from loop.store.archive import latest
from loop.store.paths import Workspace
from loop.store.state import StateError, StateStore
from loop.store.statetext import parse
from loop.views.progress import series
from loop.views.report.attention import attention
from loop.views.report.checks import checks_in, still_failing
from loop.views.report.find import archive_is, last_start, loop_events, summary
from loop.views.report.model import LoopReport, ReportError
from loop.views.report.questions import escalations_in, questions_in
from loop.views.report.tasks import graph_titles, set_outcomes, turn_tasks, worker_tasks
from loop.views.report.timeline import durations, timeline

ENDINGS = frozenset({"completed", "failed", "stopped", "escalation", "paused"})


def gather(ws: Workspace, archive: Path | None = None, latest_archive: bool = False) -> LoopReport:
    """The report of the workspace's live loop, else of its latest archive (or of the loop its
    journal last started, when neither is here); of `archive` when given."""
    if archive is None and not latest_archive:
        try:
            state = StateStore(ws).read()
        except StateError as exc:
            raise ReportError(
                f"{exc} (`loopdeck resume` repairs it; --latest-archive reports the last ended loop)"
            ) from None
        if state is not None:
            return _live(ws, state)
    if archive is None:
        archive = latest(ws)
        started = last_start(ws) if not latest_archive else None
        if started is not None and (archive is None or not archive_is(archive, started)):
            return _journal_only(ws, started)
        if archive is None:
            raise ReportError(f"no loop in {ws.root}: no state file, no journal and no archived loop")
    return _archived(ws, archive)


def _live(ws: Workspace, state: LoopState) -> LoopReport:
    events, found = loop_events(ws, state.started_at, state.loop_id, live=True)
    names, ids = _live_tasks(ws, state)
    waiting = state.waiting_for or {}
    outcome = state.status
    reason = str(waiting.get("reason") or "")
    if state.status == "paused" and waiting.get("kind"):
        outcome = f"paused ({waiting.get('kind')})"
    started = parse_iso(state.started_at)
    duration = (utcnow() - started).total_seconds() if started else None
    return _build(ws, state, events, found, "live", outcome, reason, duration, names, None, ids)


def _archived(ws: Workspace, folder: Path) -> LoopReport:
    record = summary(folder)
    if not record:
        raise ReportError(f"{folder} holds no readable summary.json: not an archived loop")
    state = None
    with contextlib.suppress(OSError, LoopdeckError, ValueError):
        state = parse((folder / "state.md").read_bytes(), folder / "state.md")
    if state is None:
        state = LoopState(
            started_at=str(record.get("started_at") or ""),
            loop_id=str(record.get("loop_id") or ""),
            iteration=_int(record.get("iteration")),
            max_iterations=_int(record.get("max_iterations")),
            body=str(record.get("prompt") or ""),
            status=str(record.get("status") or "?"),
        )
    events, found = loop_events(ws, state.started_at, state.loop_id, live=False)
    tasks = record.get("tasks")
    names = (
        {str(k): [str(t) for t in v] for k, v in tasks.items() if isinstance(v, list)}
        if isinstance(tasks, dict)
        else {}
    )
    duration = record.get("duration_s")
    return _build(
        ws, state, events, found, "archived", str(record.get("outcome") or state.status),
        str(record.get("reason") or ""), float(duration) if isinstance(duration, int | float) else None,
        names, folder,
    )  # fmt: skip


def _journal_only(ws: Workspace, start: JournalEvent) -> LoopReport:
    data = start.data
    state = LoopState(
        started_at=str(data.get("started_at") or ""),
        loop_id=str(data.get("loop_id") or ""),
        max_iterations=_int(data.get("max_iterations")),
        body=str(data.get("prompt") or ""),
        driver=str(data.get("driver") or "") or None,
        status="unknown",
    )
    events, found = loop_events(ws, state.started_at, state.loop_id, live=True)
    iterations = [e.iteration for e in events if isinstance(e.iteration, int)]
    state = replace(state, iteration=max(iterations, default=0))
    outcome, reason = "no state file here", "the loop's state lives elsewhere (a server) or was removed"
    for event in reversed(events):
        if event.kind in ENDINGS:
            outcome = {"escalation": "escalated"}.get(event.kind, event.kind)
            reason = str(event.data.get("reason") or "")
            break
    first, last = parse_iso(events[0].ts) if events else None, parse_iso(events[-1].ts) if events else None
    duration = (last - first).total_seconds() if first and last else None
    return _build(ws, state, events, found, "journal", outcome, reason, duration, {}, None)


def _live_tasks(ws: Workspace, state: LoopState) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The live loop's tasks by outcome, from its sources counted now (GitHub left out: a
    report asks no network)."""
    from loop.sources.aggregate import SourceConfig, check_all

    try:
        counts = check_all(replace(SourceConfig.from_state(ws, state), check_github=False))
    except (OSError, LoopdeckError, ValueError):
        return {}, {}
    key = {"done": "done", "skipped": "skipped", "pending": "remaining", "in_progress": "remaining"}
    names: dict[str, list[str]] = {"done": [], "skipped": [], "remaining": []}
    ids: dict[str, str] = {}
    for report in counts.sources:
        if report.enabled and report.available:
            for item in report.items:
                if item.status in key:
                    names[key[item.status]].append(item.title)
                if item.id:
                    ids[str(item.id)] = item.title
    return names, ids


def _build(
    ws: Workspace,
    state: LoopState,
    events: list[JournalEvent],
    found: bool,
    where: str,
    outcome: str,
    reason: str,
    duration: float | None,
    names: Mapping[str, list[str]],
    folder: Path | None,
    ids: Mapping[str, str] | None = None,
) -> LoopReport:
    figures = series(events)
    parallel = isinstance(state.extra.get("parallel"), dict | str) or any(
        e.kind.startswith("worker-") for e in events
    )
    titles = graph_titles(state) if parallel else {}
    titles.update(ids or {})
    tasks = worker_tasks(events, titles) if parallel else turn_tasks(events)
    set_outcomes(tasks, names)
    cost = state.usage.get("cost_micro_usd") if state.usage else None
    cost_usd = (
        cost / 1e6 if isinstance(cost, int) else (figures.points[-1].cost_usd if figures.points else None)
    )
    moments, left_out = timeline(events)
    report = LoopReport(
        workspace=str(ws.root),
        title=_title(state.prompt),
        loop_id=state.loop_id,
        started_at=state.started_at,
        driver=state.driver or _driver(events),
        where=where,
        outcome=outcome,
        reason=redact(reason),
        iterations=state.iteration,
        max_iterations=state.max_iterations,
        duration_s=duration,
        cost_usd=cost_usd,
        series=figures,
        durations=durations(events, figures),
        tasks=tasks,
        questions=questions_in(events),
        escalations=escalations_in(events, state),
        checks=checks_in(events),
        timeline=moments,
        left_out=left_out,
        attention=[],
        still_failing=still_failing(events),
        commits=sum(1 for e in events if e.kind in ("commit", "task-merged")),
        generated_at=iso_s(utcnow()),
        folder=str(folder) if folder else None,
        journal_found=found,
        parallel=parallel,
        validation=dict(state.last_validation or {}),
    )
    report.attention = attention(report, events)
    return report


def _title(prompt: str) -> str:
    for line in prompt.splitlines():
        if line.strip():
            text = redact(line.strip())
            return text if len(text) <= 120 else text[:117] + "…"
    return "a loop"


def _driver(events: Iterable[JournalEvent]) -> str:
    for event in events:
        if event.kind == "loop-started" and event.data.get("driver"):
            return str(event.data["driver"])
        if event.kind == "runner-started":
            return "runner"
        if event.kind == "session-bound":
            return "hook"
    return "?"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0

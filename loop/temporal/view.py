"""A loop on Temporal as people read it: the same `Snapshot` the monitor and `status --json`
read from a workspace's files, built from the workflow's `snapshot` query instead; and the
fleet's rows from the server's list of loops.

The monitor's panels are bound to a `Snapshot` and never ask where it came from, so a loop on
another machine is drawn by the same code as one in this folder.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from loop.core.model import Command, JournalEvent
from loop.core.scheduler import board_of, section_of
from loop.temporal import protocol
from loop.views.fleet import FleetRow
from loop.views.snapshot import LoopView, Snapshot, _durations, _verifications

KIND = "temporal"
"""The kind a loop on Temporal shows in the fleet and `status --json`."""


def events(answer: dict[str, Any]) -> list[JournalEvent]:
    out = []
    for obj in answer.get("events") or []:
        if isinstance(obj, dict) and isinstance(obj.get("kind"), str):
            iteration = obj.get("iteration")
            out.append(
                JournalEvent(
                    ts=str(obj.get("ts", "")),
                    kind=str(obj["kind"]),
                    iteration=iteration if isinstance(iteration, int) else None,
                    data=dict(obj.get("data") or {}),
                )
            )
    return out


def snapshot(answer: dict[str, Any], workflow_id: str, target: Any = None) -> Snapshot:
    """The query's answer as a `Snapshot` (`workspace` names the loop: server and id)."""
    address = getattr(target, "address", "")
    where = f"temporal://{address}/{workflow_id}" if address else f"temporal:{workflow_id}"
    journal = tuple(events(answer))
    raw = answer.get("state")
    if not isinstance(raw, dict):
        return Snapshot(where, None, events=journal)
    state = protocol.state_from(raw)
    ended = answer.get("ended") if isinstance(answer.get("ended"), dict) else None
    view = LoopView.of_state(
        state,
        kind=KIND,
        state_file=where,
        session_id=None,
        driver="temporal",
        pid=None,
        alive=ended is None,
        agents=None,
    )
    tasks = [protocol.task_from(t) for t in answer.get("tasks") or [] if isinstance(t, dict)]
    sources = protocol.graph_sources(tasks, f"the task graph ({len(tasks)} tasks)", "")
    pending = tuple(
        Command(
            id=str(c.get("id", "")),
            ts=str(c.get("ts", "")),
            kind=str(c.get("kind", "")),
            source=str(c.get("source", "")),
            reason=c.get("reason"),
            value=c.get("value"),
            target=c.get("target"),
        )
        for c in answer.get("pending") or []
        if isinstance(c, dict)
    )
    return Snapshot(
        where,
        view,
        sources=sources,
        events=journal,
        verifications=_verifications(journal),
        durations=_durations(journal),
        parallel=section_of(state),
        pending=pending,
        archive=dict(ended.get("summary") or {}) if ended else None,
    )


def lines(snap: Snapshot) -> list[str]:
    """`loopdeck status` for a loop on Temporal."""
    loop = snap.loop
    if loop is None:
        return [f"no loop at {snap.workspace}"]
    out = [
        f"loop          {snap.workspace}",
        f"status        {loop.status}" + (" (ended)" if loop.alive is False else ""),
    ]
    if loop.waiting_for:
        out.append(f"waiting for   {loop.waiting_for.get('kind')}: {loop.waiting_for.get('reason', '')}")
    limit = f"/{loop.max_iterations}" if loop.max_iterations else ""
    out.append(f"iteration     {loop.iteration}{limit}")
    if snap.sources is not None:
        report = snap.sources.sources[0] if snap.sources.sources else None
        if report is not None:
            out.append(
                f"tasks         {report.done} done, {report.in_progress} in progress, "
                f"{report.pending} pending"
            )
    for worker in workers(snap):
        out.append(f"worker        {worker}")
    return out


def workers(snap: Snapshot) -> list[str]:
    if snap.parallel is None:
        return []
    from loop.core.scheduler import Board

    board = Board.from_json(snap.parallel)
    return [f"{w.name}: task {w.task}, {w.status}, turn {w.turns}" for w in board.workers]


def ending_lines(ended: dict[str, Any]) -> list[str]:
    summary = ended.get("summary") or {}
    tasks = summary.get("tasks") or {}
    out = [f"loopdeck: the loop {ended.get('outcome', 'ended')}: {ended.get('reason', '')}".rstrip(": ")]
    if tasks:
        out.append(
            f"loopdeck: {len(tasks.get('done') or [])} tasks done, "
            f"{len(tasks.get('remaining') or [])} remaining, "
            f"{ended.get('iteration', '?')} turns"
        )
    return out


def row(workflow_id: str, listed: dict[str, Any], answer: dict[str, Any] | None) -> FleetRow:
    """One loop of the server as a fleet row (`folder` is its id)."""
    if answer is None:
        return FleetRow(
            workflow_id, KIND, str(listed.get("status", "unknown")), last_event=listed.get("started")
        )
    snap = snapshot(answer, workflow_id)
    loop = snap.loop
    if loop is None:
        return FleetRow(workflow_id, KIND, str(listed.get("status", "unknown")))
    waiting = str(loop.waiting_for.get("kind") or "a person") if loop.waiting_for else None
    board = board_of(protocol.state_from(answer["state"]))
    asking = [w.name for w in board.workers if w.status == "question"]
    if asking and waiting is None:
        waiting = f"question ({asking[0]})"
    status = loop.status
    if board.workers:
        status += f" · {len(board.workers)} worker{'s' if len(board.workers) != 1 else ''}"
    return FleetRow(
        workflow_id,
        KIND,
        status,
        loop.iteration,
        loop.max_iterations or None,
        snap.sources.pending_total if snap.sources else None,
        waiting,
        snap.events[-1].ts if snap.events else loop.started_at,
        round(loop.usage.get("cost_micro_usd", 0) / 1e6, 2)
        if loop.usage and loop.usage.get("cost_micro_usd")
        else None,
        needs_person=waiting is not None or loop.status in ("paused", "failed"),
    )


def without_events(snap: Snapshot) -> Snapshot:
    return replace(snap, events=())

"""`loopdeck status` as lines a person reads: the CLI prints them, `/loop-status` hands them to
the session. One function, so both say the same thing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loop import formats
from loop.core.model import same_loop
from loop.core.policy import named
from loop.store.archive import latest_summary
from loop.store.paths import Workspace
from loop.views.landed import undone
from loop.views.snapshot import read
from loop.views.summary import archived_lines, cost_line, turn_line, validation_line


def render(ws: Workspace) -> tuple[int, list[str], list[str]]:
    """(exit status, the lines for stdout, the error lines for stderr) of the human status."""
    snap = read(ws)
    if snap.error is not None:
        errors = [f"error: {snap.error.message}"]
        if snap.backup_exists:
            errors.append(
                f"a backup of this loop's last good state is in {ws.backup}: `loopdeck restore` puts it back"
            )
        else:
            errors.append("`loopdeck resume` rebuilds the state from the journal")
        return 1, [], errors
    neighbours = formats.detect(ws.root)
    lines = _neighbours(neighbours)
    loop = snap.loop
    if loop is None:
        lines.append(f"no loop in {ws.root}" if not neighbours else f"no loopdeck loop in {ws.root}")
        lines += _summary_lines(snap.archive)  # the snapshot found it: the archive is listed once
        lines += [f"{name:<13}{value}" for name, value in pull_rows(snap.events) + undone_rows(snap.events)]
        return 0, lines, []
    limit = f"/{loop.max_iterations}" if loop.max_iterations else " (no limit)"
    driver = loop.driver or "none yet"
    if loop.pid is not None:
        driver += f", pid {loop.pid} " + ("alive" if loop.alive else "not running")
    unled = loop.status in ("running", "initializing", "paused") and loop.alive is not True
    if not named(loop.driver).in_session and unled:
        # Nobody drives it (a runner killed, or killed before it took the loop): say what does.
        driver += ("" if loop.pid is not None else ", no runner") + "; `loopdeck resume` restarts it"
    rows = [
        ("loop", f"{loop.kind}  {loop.state_file}"),
        ("status", f"{loop.status} (driver: {driver})"),
        *([("waiting for", _waiting(loop.waiting_for))] if loop.waiting_for else []),
        *_answer_with(loop.waiting_for, snap.pending),
        *_queued(snap.pending, loop),
        *([("confirmed", _unconfirmed(ws))] if not snap.confirmed else []),
        *(
            [("cost", cost_line(loop.usage, loop.limits))]
            if loop.usage or (loop.limits or {}).get("max_cost_micro_usd")
            else []
        ),
        *([("limits", _limits(loop.limits))] if loop.limits else []),
        *([("agent", _agents(loop.agents))] if loop.agents else []),
        *([("sandbox", loop.sandbox)] if loop.sandbox else []),
        *_turns(snap.events),
        *([("tests", validation_line(loop.last_validation))] if loop.last_validation else []),
        *([("notify", ", ".join(loop.notify))] if loop.notify else []),
        ("iteration", f"{loop.iteration}{limit}"),
        (
            "verification",
            f"in progress, {loop.verification_remaining} loop(s) remaining"
            if loop.verification_mode
            else "not started",
        ),
        ("promise", loop.completion_promise if loop.completion_promise != "null" else "ALL_TASKS_COMPLETE"),
        ("started", loop.started_at or "?"),
        ("session", loop.session_id or "not bound yet"),
    ]
    if snap.parallel is not None:
        rows += status_rows(snap.parallel)
    rows += pull_rows(snap.events) + undone_rows(snap.events)
    if snap.sources is not None:
        rows.append(("sources", _sources_line(snap.sources)))
    lines += [f"{name:<13}{value}" for name, value in rows]
    if loop.status in ("stopped", "failed"):
        lines += _last_summary(ws, loop.started_at, loop.loop_id)
    return 0, lines, []


def pull_rows(events: Sequence[Any]) -> list[tuple[str, str]]:
    """The last loop's pull requests (`run --pr`), one a task: its address and how it stands."""
    start = max((i for i, e in enumerate(events) if e.kind == "loop-started"), default=0)
    pulls: dict[str, list[str]] = {}
    for event in events[start:]:
        task, url = event.data.get("task"), event.data.get("url")
        if not event.kind.startswith("pr-") or not isinstance(url, str):
            continue
        where = pulls.setdefault(str(task), [url, "open"])
        where[0] = url
        if event.kind == "pr-merged":
            where[1] = "merged"
        elif event.kind == "pr-rework":
            where[1] = "changes asked" if event.data.get("reviewers") else "checks failed"
        else:
            where[1] = "open"
    return [
        ("pull requests" if i == 0 else "", f"task {task}: {url} ({how})")
        for i, (task, (url, how)) in enumerate(pulls.items())
    ]


def undone_rows(events: Sequence[Any]) -> list[tuple[str, str]]:
    """The tasks undone since the last loop's summary counted them done (`landed.undone`)."""
    return [
        ("undone" if i == 0 else "", f"task {one.task} at {one.undone[:19]}")
        for i, one in enumerate(undone(events))
    ]


def _answer_with(waiting: dict[str, Any] | None, pending: Sequence[Any]) -> list[tuple[str, str]]:
    """How a person answers the agent's question (until an answer is queued)."""
    if (waiting or {}).get("kind") != "question" or any(c.kind == "answer" for c in pending):
        return []
    return [("answer with", 'loopdeck answer "…" (it goes into the agent\'s next prompt)')]


QUOTED = 60
"""How much of a queued answer or note `status` quotes."""


def _queued(pending: Sequence[Any], loop: Any) -> list[tuple[str, str]]:
    """The commands sent and not applied yet, and when they apply: a person who answered a
    loop nobody drives sees the answer waits, and what delivers it."""
    if not pending:
        return []
    if not named(loop.driver).in_session and loop.alive is True:
        when = "the runner applies it within a second"
    elif not named(loop.driver).in_session:
        when = "applies when a runner drives the loop again (`loopdeck resume` restarts it)"
    else:
        when = "applies at the agent's next Stop"
    rows = []
    for i, command in enumerate(pending):
        what = command.kind
        text = " ".join(str(command.reason or "").split())
        if command.kind in ("answer", "say") and text:
            what += f' "{text[:QUOTED]}{"…" if len(text) > QUOTED else ""}"'
        if command.target:
            what += f" for {command.target}"
        rows.append(("queued" if i == 0 else "", f"{what} (sent {command.ts}); {when}"))
    return rows


def _agents(recorded: dict[str, str]) -> str:
    """`codex (codex exec --json …); fallback: gemini (gemini …)`: which CLI runs the turns."""
    # Here, not at the top: ~17 ms (`-X importtime`) that `log`, `sources` and a loop with no
    # recorded agent never use.
    from loop.agents import adapter_for

    parts = []
    for key, label in (("agent", ""), ("fallback_agent", "fallback: ")):
        command = recorded.get(key)
        if command:
            parts.append(f"{label}{adapter_for(command).name} ({command})")
    return "; ".join(parts)


TURNS_SHOWN = 3


def _turns(events: Sequence[Any]) -> list[tuple[str, str]]:
    """The last iterations' agent, tokens and cost, as the runner journaled them."""
    done = [e for e in events if e.kind == "iteration-completed" and e.data.get("agent")]
    lines = [turn_line({"iteration": e.iteration, **e.data}) for e in done[-TURNS_SHOWN:]]
    return [("last turns" if i == 0 else "", line) for i, line in enumerate(lines)]


def _unconfirmed(ws: Workspace) -> str:
    return "no: it names what nobody on this machine confirmed; review it with `loopdeck trust`"


def _last_summary(ws: Workspace, started_at: str, loop_id: str) -> list[str]:
    """The summary the last ending archived, if it is of this loop (`started_at`, `loop_id`)."""
    found = latest_summary(ws)
    if found is None or not same_loop(
        str(found[1].get("started_at") or ""), str(found[1].get("loop_id") or ""), started_at, loop_id
    ):
        return []
    return _summary_lines({**found[1], "folder": str(found[0])})


def _summary_lines(record: dict[str, Any] | None) -> list[str]:
    """An archived summary (with the `folder` it is in) as the lines `status` prints."""
    if record is None:
        return []
    shown = {k: v for k, v in record.items() if k != "folder"}
    return [*archived_lines(shown), f"{'archive':<13}{record.get('folder')}"]


def _sources_line(aggregate: Any) -> str:
    """`3 pending: task_file 2, claude_tasks 1, github off`: what keeps the loop going, at a glance."""
    parts = []
    for report in aggregate.sources:
        if not report.enabled:
            parts.append(f"{report.name} off")
        elif not report.available:
            parts.append(f"{report.name} unavailable")
        else:
            parts.append(f"{report.name} {report.pending}")
    return f"{aggregate.pending_total} pending: " + ", ".join(parts)


def _limits(limits: dict[str, int]) -> str:
    words = {"stuck_after": "stuck after {} turns", "same_error_after": "same error {} times"}
    return ", ".join(words[k].format(v) for k, v in limits.items() if k in words) or "defaults"


def _neighbours(found: Sequence[Any]) -> list[str]:
    """Other tools' loops in the folder, one line each, before loopdeck's own."""
    lines = []
    for item in found:
        view = item.loop
        if view is None:
            lines.append(f"{item.kind:<20}unreadable: {item.problem}")
            continue
        limit = f"/{view.max_iterations}" if view.max_iterations else ""
        iteration = f"iteration {view.iteration}{limit}" if view.iteration is not None else ""
        pending = f"{view.tasks_pending} pending" if view.tasks_pending is not None else ""
        details = ", ".join(part for part in (iteration, pending) if part)
        shown = f" ({details})" if details else ""
        lines.append(f"{item.kind:<20}{view.status}{shown}  {view.state_file}  (read-only)")
    if found:
        lines.append("")
    return lines


def _waiting(waiting: dict[str, Any]) -> str:
    if waiting.get("kind") == "usage-limit":
        return f"the usage limit to reset at {waiting.get('until') or '?'} ({waiting.get('reason', '')})"
    return f"a person: {waiting.get('reason', '')} (since {waiting.get('since') or '?'})"


def status_rows(section: dict[str, Any]) -> list[tuple[str, str]]:
    """`loopdeck status` lines for a loop with parallel workers."""
    workers = [w for w in section.get("workers") or [] if isinstance(w, dict)]
    active = [w for w in workers if w.get("status") not in ("queued", "ready")]
    busy = f"{len(active)}/{section.get('capacity', '?')} busy"
    rows = [("workers", f"{busy}, defer streak {section.get('defer_streak', 0)}")]
    if section.get("isolation") == "worktree":
        rows.append(("  branches", f"one per task, merged into {section.get('loop_branch') or '?'}"))
    for worker in workers:
        files = ", ".join(str(f) for f in worker.get("files") or []) or "no files"
        branch = f", {worker['branch']}" if worker.get("branch") else ""
        rows.append(
            (
                f"  {worker.get('name', '?')}",
                f"task {worker.get('task', '?')}, turn {worker.get('turns', 1)}, "
                f"{worker.get('status', '?')} ({files}){branch}",
            )
        )
    queue = [str(q) for q in section.get("queue") or []]
    if queue:
        named = {str(w.get("name")): str(w.get("task")) for w in workers}
        rows.append(("  merge queue", ", ".join(f"task {named.get(q, '?')} ({q})" for q in queue)))
    rows += [("  waiting", str(d.get("line"))) for d in section.get("deferred") or [] if isinstance(d, dict)]
    return rows

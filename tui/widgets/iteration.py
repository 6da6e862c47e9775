"""Iteration: N of max with a bar, status, driver, time, time per iteration, current task."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import var
from textual.widgets import Sparkline, Static

from loop.core.timeutil import parse_iso
from loop.views.snapshot import Snapshot
from loop.views.summary import cost_line
from tui.widgets.common import clip, clock_of, duration, relative, roughly_ago, set_border, update_static


def meter(done: int, total: int, width: int = 30) -> str:
    """`▰▰▰▱▱▱ 34%`, as `loopdeck status` draws progress; past the limit it stays full and says so."""
    if total <= 0:
        return f"{'▱' * width} no limit"
    ratio = min(1.0, done / total)
    filled = int(ratio * width)
    over = "  past the limit" if done > total else ""
    return f"{'▰' * filled}{'▱' * (width - filled)} {int(done / total * 100)}%{over}"


def finished_text(archive: dict[str, Any], snapshot: Snapshot) -> str:
    """The archived loop's summary (`summary.json`): how it ended, how far it got, what it cost."""
    outcome = str(archive.get("outcome") or archive.get("status") or "ended")
    reason = archive.get("reason")
    iterations = archive.get("iteration", archive.get("iterations", "?"))
    lines = [f"ended: {outcome}" + (f" ({reason})" if reason else "")]
    seconds = archive.get("duration_s")
    if not isinstance(seconds, int | float):
        started = parse_iso(str(archive.get("started_at") or ""))
        ended = parse_iso(str(archive.get("archived_at") or ""))
        seconds = (ended - started).total_seconds() if started and ended else None
    took = duration(seconds) if seconds is not None else None
    lines.append(f"{iterations} iterations" + (f" in {took}" if took else ""))
    pending = archive.get("pending_at_end")
    raw = archive.get("tasks")
    named: dict[str, Any] = raw if isinstance(raw, dict) else {}
    done = named.get("done") if isinstance(named.get("done"), list) else None
    tasks = (
        ", ".join(
            part
            for part in (
                f"{len(done)} task(s) done" if done is not None else None,
                f"{pending} left" if isinstance(pending, int) else None,
            )
            if part
        )
        or None
    )
    commits = archive.get("commits")
    made = f"{len(commits)} commit(s)" if isinstance(commits, list) else None
    usage = archive.get("usage")
    cost = cost_line(usage) if isinstance(usage, dict) and usage else None
    lines.append(" · ".join(x for x in (tasks, made, cost) if x) or "no tally recorded")
    lines.append(f"archived in {relative(str(archive.get('folder', '?')), snapshot.workspace)}")
    return "\n".join(lines)


def task_progress(snapshot: Snapshot) -> tuple[int, int]:
    """(done, all) tasks the readable sources count: what a person means by progress; (0, 0)
    when no source knows its tasks."""
    if snapshot.sources is None or snapshot.sources.uncertain:
        return 0, 0
    readable = [r for r in snapshot.sources.sources if r.enabled and r.available]
    done = sum(r.done + r.skipped for r in readable)
    return done, done + sum(r.open_count for r in readable)


def working_on(snapshot: Snapshot) -> str:
    """What is under way: the current task, or a loop of workers' tasks and its merge queue."""
    section = snapshot.parallel
    loop = snapshot.loop
    if section is None or loop is None:
        return f"task: {clip(loop.current_task or '-', 70) if loop else '-'}"
    workers = [w for w in section.get("workers") or [] if isinstance(w, dict)]
    tasks = ", ".join(f"{w.get('task')} ({w.get('status')})" for w in workers) or "none"
    queued = len(section.get("queue") or [])
    return clip(f"workers on tasks: {tasks}" + (f" · {queued} to merge" if queued else ""), 90)


@dataclass(frozen=True)
class IterationView:
    """What the panel shows, computed from a snapshot and the time: equal views draw nothing."""

    title: str
    bar: str
    facts: str
    durations: tuple[float, ...]
    subtitle: str
    idle: bool


def iteration_view(snapshot: Snapshot, now: datetime) -> IterationView:
    loop = snapshot.loop
    if loop is None:
        archive = snapshot.archive
        facts = (
            finished_text(archive, snapshot)
            if archive
            else 'no loop here: `loopdeck run "what to do"` starts one (or `loopdeck start` '
            "inside Claude Code)"
        )
        return IterationView("Last loop" if archive else "Iteration", "", facts, (), "", idle=True)
    alive = {True: "running", False: "not running", None: "inside Claude Code's session"}[loop.alive]
    durations = snapshot.durations
    average = f"{duration(sum(durations) / len(durations))} per iteration" if durations else "no timings yet"
    limit = loop.max_iterations or "∞"
    facts = (
        f"iteration {loop.iteration} of {limit} · {loop.status}"
        + (" · ESCALATED" if loop.escalated else "")
        + (f" · {cost_line(loop.usage, loop.limits)}" if loop.usage else "")
        + f"\ndriver {loop.driver or '-'} ({alive}) · started {roughly_ago(loop.started_at, now)} · {average}"
        + f"\n{working_on(snapshot)}"
    )
    done, total = task_progress(snapshot)
    bar = (
        f"{meter(done, total)} · {done}/{total} tasks"
        if total
        else meter(loop.iteration, loop.max_iterations)
    )
    return IterationView(
        "Iteration",
        bar,
        facts,
        tuple(durations) or (0.0,),
        f"{loop.iteration}/{limit}",
        idle=False,
    )


class IterationPanel(Vertical):
    DEFAULT_CSS = """
    IterationPanel { border: round $primary 50%; padding: 0 1; height: auto; }
    IterationPanel #iteration-bar { height: 1; color: $accent; }
    IterationPanel Sparkline { height: 2; margin-top: 1; }
    IterationPanel #iteration-facts { height: auto; }
    IterationPanel.-idle #iteration-bar, IterationPanel.-idle Sparkline { display: none; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's)."""
    view: var[IterationView | None] = var(None, init=False)
    """What is on screen; the panel's own 1 s clock recomputes it (the time since the start)."""

    def compose(self) -> ComposeResult:
        yield Static(id="iteration-bar")
        yield Static(id="iteration-facts")
        yield Sparkline([], id="iteration-times")

    def on_mount(self) -> None:
        """The clock is the panel's: it stops with the panel, never ticking into a screen being
        torn down."""
        self.border_title = "Iteration"
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self.snapshot is not None and self.snapshot.loop is not None:
            self.view = iteration_view(self.snapshot, clock_of(self))

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        self.view = iteration_view(snapshot, clock_of(self)) if snapshot is not None else None

    def watch_view(self, old: IterationView | None, view: IterationView | None) -> None:
        if view is None:
            return
        set_border(self, title=view.title, subtitle=view.subtitle)
        self.set_class(view.idle, "-idle")
        if old is None or old.bar != view.bar:
            self.query_one("#iteration-bar", Static).update(view.bar, layout=False)
        if old is None or old.facts != view.facts:
            update_static(self.query_one("#iteration-facts", Static), view.facts)
        if old is None or old.durations != view.durations:
            self.query_one(Sparkline).data = list(view.durations)

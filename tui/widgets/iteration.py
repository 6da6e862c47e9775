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
from loop.views.landed import undone
from loop.views.snapshot import Snapshot
from loop.views.summary import cost_line
from tui.widgets.clocks import Clocks
from tui.widgets.common import (
    clock_of,
    duration,
    hanging,
    relative,
    roughly_ago,
    set_border,
    update_static,
)
from tui.widgets.sources import START_AGAIN

BAR_WIDTH = 30
"""The progress bar's cells at most; a narrower panel gets a shorter bar, never a cut count."""
SHORT = 30
"""Below this many rows the panel is compact: what the top bar already says is left out."""


def meter(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """`▰▰▰▱▱▱ 34%`, as `loopdeck status` draws progress; past the limit it stays full and says so."""
    if total <= 0:
        return f"{'▱' * width} no limit"
    ratio = min(1.0, done / total)
    filled = int(ratio * width)
    over = "  past the limit" if done > total else ""
    return f"{'▰' * filled}{'▱' * (width - filled)} {int(done / total * 100)}%{over}"


def progress_bar(done: int, total: int, width: int, tail: str = "") -> str:
    """The meter and its `tail` (`· 2/5 tasks`) in `width` cells: the bar gives way first."""
    room = width - len(meter(done, total, 0)) - len(tail) - 1
    return meter(done, total, max(6, min(BAR_WIDTH, room))) + tail


NAMES_SHOWN = 8
"""Task titles listed per kind (done, skipped, left), as `loopdeck status` lists them."""


def names(archive: dict[str, Any], key: str) -> list[str] | None:
    """The titles `summary.json` lists under `tasks.<key>` (None when it names none)."""
    raw = archive.get("tasks")
    titles = raw.get(key) if isinstance(raw, dict) else None
    return [" ".join(str(t).split()) for t in titles] if isinstance(titles, list) else None


def listed(label: str, titles: list[str]) -> str:
    """`done (5): a, b, c`, the first `NAMES_SHOWN` titles and how many more."""
    shown = ", ".join(titles[:NAMES_SHOWN]) or "none"
    more = f", … {len(titles) - NAMES_SHOWN} more" if len(titles) > NAMES_SHOWN else ""
    return f"{label} ({len(titles)}): {shown}{more}"


def finished_text(archive: dict[str, Any], snapshot: Snapshot, width: int = 80) -> str:
    """The archived loop's summary (`summary.json`), `width` cells wide: how it ended and how
    long it took, the commits and the cost, the tasks done and left by name, and how to start
    again (as the README says). A fact that wraps goes on indented under itself."""
    outcome = str(archive.get("outcome") or archive.get("status") or "ended")
    reason = archive.get("reason")
    iterations = archive.get("iteration", archive.get("iterations", "?"))
    facts = [f"ended: {outcome}" + (f" ({reason})" if reason else "")]
    seconds = archive.get("duration_s")
    if not isinstance(seconds, int | float):
        started = parse_iso(str(archive.get("started_at") or ""))
        ended = parse_iso(str(archive.get("archived_at") or ""))
        seconds = (ended - started).total_seconds() if started and ended else None
    took = f"{iterations} iterations" + (f" in {duration(seconds)}" if seconds is not None else "")
    usage = archive.get("usage")
    cost = cost_line(usage) if isinstance(usage, dict) and usage else "no cost reported"
    facts.append(" · ".join(x for x in (took, commits_made(archive, snapshot), cost) if x))
    named = False
    for key, label in (("done", "done"), ("skipped", "skipped"), ("remaining", "left")):
        titles = names(archive, key)
        if titles is None or (key == "skipped" and not titles):
            continue
        named = True
        facts.append(listed(label, titles))
    if not named:
        pending = archive.get("pending_at_end")
        facts.append(f"left: {pending} task(s)" if isinstance(pending, int) else "tasks: not recorded")
    taken_back = [f"task {one.task}" for one in undone(snapshot.events)]
    if taken_back:  # `loopdeck undo` took them back since: the summary counted them done
        facts.append(listed("undone since", taken_back))
    facts.append(f"archived in {relative(_without_id(archive), snapshot.workspace)}")
    lines = [line for fact in facts for line in hanging(fact, width)]
    (claude, in_claude), (terminal, in_terminal) = START_AGAIN
    first, second = f"start again {claude}", f"or {terminal.strip()}"
    if len(first) + 1 + len(in_claude) <= width:
        lines += [f"{first} {in_claude}", f"{second:>{len(first)}} {in_terminal}"]
    else:
        lines += [first, f"  {in_claude}", second, f"  {in_terminal}"]
    return "\n".join(lines)


COMMIT_EVENTS = frozenset({"commit", "task-merged"})
"""The journal's events that each leave one commit on the loop's branch."""


def _without_id(archive: dict[str, Any]) -> str:
    """The archive's folder as the screen names it: without the loop's id, which is for
    telling loops apart, not for reading (the folder is found from what is left)."""
    folder = str(archive.get("folder", "?"))
    ident = archive.get("loop_id")
    head, sep, name = folder.rpartition("/")
    if isinstance(ident, str) and ident and f"-{ident}" in name:
        name = name.replace(f"-{ident}", "", 1)
    return head + sep + name


def commits_made(archive: dict[str, Any], snapshot: Snapshot) -> str:
    """`8 commits`: as the summary lists them, else counted in the journal since the loop
    started (`8+ commits` when its start is older than the journal's tail). A loop of workers
    commits on each task's branch and lands every task with a merge commit: its merges are
    the commits a person finds on the loop's branch."""
    commits = archive.get("commits")
    if isinstance(commits, list):
        count, more = len(commits), ""
    else:
        events = snapshot.events
        start = next((i for i in range(len(events) - 1, -1, -1) if events[i].kind == "loop-started"), None)
        count = sum(1 for e in events[(start or 0) :] if e.kind in COMMIT_EVENTS)
        more = "+" if start is None and count else ""
    return f"{count}{more} commit{'' if count == 1 and not more else 's'}"


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
        return f"task: {' '.join((loop.current_task or '-').split()) if loop else '-'}"
    workers = [w for w in section.get("workers") or [] if isinstance(w, dict)]
    tasks = ", ".join(f"{w.get('task')} ({w.get('status')})" for w in workers) or "none"
    queued = len(section.get("queue") or [])
    return f"workers on tasks: {tasks}" + (f" · {queued} to merge" if queued else "")


@dataclass(frozen=True)
class IterationView:
    """What the panel shows, computed from a snapshot, the time and the room: equal views draw
    nothing."""

    title: str
    bar: str
    facts: str
    durations: tuple[float, ...]
    subtitle: str
    idle: bool


def iteration_view(
    snapshot: Snapshot, now: datetime, width: int = 80, compact: bool = False
) -> IterationView:
    """The panel for `snapshot` at `now`, `width` cells wide; `compact` (a short terminal)
    leaves out what the top bar says already (the iteration, the status, the driver) and, for
    workers, the tasks the workers panel lists."""
    loop = snapshot.loop
    if loop is None:
        archive = snapshot.archive
        if snapshot.error is not None:  # a loop whose state does not read: the error panel's
            facts = "not known while the state file does not read"
        elif archive:
            facts = finished_text(archive, snapshot, width)
        else:
            facts = f"no loop here: {START_AGAIN[1][1]} starts one ({START_AGAIN[0][1]} in Claude Code)"
        return IterationView("Last loop" if archive else "Iteration", "", facts, (), "", idle=True)
    alive = {True: "running", False: "not running", None: "inside Claude Code's session"}[loop.alive]
    durations = snapshot.durations
    average = f"{duration(sum(durations) / len(durations))} per iteration" if durations else "no timings yet"
    limit = loop.max_iterations or "∞"
    flags = (" · ESCALATED" if loop.escalated else "") + (
        f" · {cost_line(loop.usage, loop.limits)}" if loop.usage else ""
    )
    started = f"started {roughly_ago(loop.started_at, now)} · {average}"
    if compact:
        lines = [started + flags]
        if snapshot.parallel is None:
            lines.append(working_on(snapshot))
    else:
        lines = [
            f"iteration {loop.iteration} of {limit} · {loop.status}{flags}",
            f"driver {loop.driver or '-'} ({alive}) · {started}",
            working_on(snapshot),
        ]
    done, total = task_progress(snapshot)
    bar = (
        progress_bar(done, total, width, f" · {done}/{total} tasks")
        if total
        else progress_bar(loop.iteration, loop.max_iterations, width)
    )
    return IterationView(
        "Iteration",
        bar,
        "\n".join(lines),
        tuple(durations),
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
    IterationPanel.-untimed Sparkline { display: none; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's)."""
    view: var[IterationView | None] = var(None, init=False)
    """What is on screen; the shared second recomputes it (the time since the start)."""

    def compose(self) -> ComposeResult:
        yield Static(id="iteration-bar")
        yield Static(id="iteration-facts")
        yield Sparkline([], id="iteration-times")

    def on_mount(self) -> None:
        """The elapsed time ages on the app's shared second, which stops reaching the panel when
        it goes and never ticks into a screen being torn down (`tui/widgets/clocks.py`)."""
        self.border_title = "Iteration"
        self.clocks = Clocks()
        self.clocks.every_second(self, self._tick)

    def _tick(self) -> None:
        if self.snapshot is not None and self.snapshot.loop is not None:
            self.view = self.view_of(self.snapshot)

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        self.view = self.view_of(snapshot) if snapshot is not None else None

    def on_resize(self) -> None:
        """The bar fits the panel's width; a short terminal gets the compact facts."""
        if self.snapshot is not None:
            self.view = self.view_of(self.snapshot)

    def view_of(self, snapshot: Snapshot) -> IterationView:
        width = self.query_one("#iteration-facts").content_size.width or self.content_size.width or 80
        return iteration_view(snapshot, clock_of(self), width, compact=self.app.size.height < SHORT)

    def watch_view(self, old: IterationView | None, view: IterationView | None) -> None:
        if view is None:
            return
        set_border(self, title=view.title, subtitle=view.subtitle)
        self.set_class(view.idle, "-idle")
        self.set_class(not view.durations, "-untimed")  # no chart before a first timing
        if old is None or old.bar != view.bar:
            self.query_one("#iteration-bar", Static).update(view.bar, layout=False)
        if old is None or old.facts != view.facts:
            update_static(self.query_one("#iteration-facts", Static), view.facts)
        if old is None or old.durations != view.durations:
            self.query_one(Sparkline).data = list(view.durations)

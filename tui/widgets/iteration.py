"""Iteration: N of max with a bar, status, driver, time, time per iteration, current task."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from loop.snapshot import Snapshot
from loop.summary import cost_line
from loop.timeutil import parse_iso, utcnow
from tui.widgets.common import clip, duration, relative


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
    tasks = f"{pending} task(s) left" if isinstance(pending, int) else None
    commits = archive.get("commits")
    made = f"{len(commits)} commit(s)" if isinstance(commits, list) else None
    usage = archive.get("usage")
    cost = cost_line(usage) if isinstance(usage, dict) and usage else None
    lines.append(" · ".join(x for x in (tasks, made, cost) if x) or "no tally recorded")
    lines.append(f"archived in {relative(str(archive.get('folder', '?')), snapshot.workspace)}")
    return "\n".join(lines)


class IterationPanel(Vertical):
    DEFAULT_CSS = """
    IterationPanel { border: round $primary 50%; padding: 0 1; height: auto; }
    IterationPanel #iteration-bar { height: 1; color: $accent; }
    IterationPanel Sparkline { height: 2; margin-top: 1; }
    IterationPanel #iteration-facts { height: auto; }
    IterationPanel.-idle #iteration-bar, IterationPanel.-idle Sparkline { display: none; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="iteration-bar")
        yield Static(id="iteration-facts")
        yield Sparkline([], id="iteration-times")

    shown: Snapshot | None = None
    """The snapshot on screen: the panel's own 1 s timer redraws its clock from it. The timer is
    the panel's, so it stops when the panel goes (never a tick into a screen being torn down)."""

    def on_mount(self) -> None:
        self.border_title = "Iteration"
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self.shown is not None and self.shown.loop is not None:
            clock = getattr(self.app, "clock", utcnow)
            self.show(self.shown, clock())

    def show(self, snapshot: Snapshot, now: datetime) -> None:
        self.shown = snapshot
        bar = self.query_one("#iteration-bar", Static)
        facts = self.query_one("#iteration-facts", Static)
        spark = self.query_one(Sparkline)
        loop = snapshot.loop
        if loop is None:
            bar.update("")
            self.add_class("-idle")
            archive = snapshot.archive
            self.border_title = "Last loop" if archive else "Iteration"
            facts.update(
                finished_text(archive, snapshot)
                if archive
                else 'no loop here: `loopdeck run "what to do"` starts one (or `loopdeck start` '
                "inside Claude Code)"
            )
            spark.data = []
            self.border_subtitle = ""
            return
        self.border_title = "Iteration"
        self.remove_class("-idle")
        bar.update(meter(loop.iteration, loop.max_iterations))
        started = parse_iso(loop.started_at)
        elapsed = duration((now - started).total_seconds()) if started else "?"
        alive = {True: "running", False: "not running", None: "inside Claude Code's session"}[loop.alive]
        durations = snapshot.durations
        average = (
            f"{duration(sum(durations) / len(durations))} per iteration" if durations else "no timings yet"
        )
        limit = loop.max_iterations or "∞"
        facts.update(
            f"iteration {loop.iteration} of {limit} · {loop.status}"
            + (" · ESCALATED" if loop.escalated else "")
            + (f" · {cost_line(loop.usage, loop.limits)}" if loop.usage else "")
            + f"\ndriver {loop.driver or '-'} ({alive}) · started {elapsed} ago · {average}"
            + f"\ntask: {clip(loop.current_task or '-', 70)}"
        )
        spark.data = list(durations) or [0.0]
        self.border_subtitle = f"{loop.iteration}/{limit}"

"""The top line: the loop's state at a glance, coloured by status."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from textual.reactive import var
from textual.widgets import Static

from loop.core.timeutil import human_duration, parse_iso
from loop.views.snapshot import Snapshot
from tui.widgets.clocks import Clocks
from tui.widgets.common import clock_of

STATES = ("running", "paused", "escalated", "failed", "completed", "idle", "error", "pending")


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; padding: 0 1; background: $panel; color: $text; text-style: bold; }
    StatusBar.-running { background: $success 40%; }
    StatusBar.-paused { background: $warning 40%; }
    StatusBar.-escalated { background: $error 60%; }
    StatusBar.-failed, StatusBar.-error { background: $error 80%; }
    StatusBar.-completed { background: $primary 50%; }
    StatusBar.-idle { background: $panel; }
    StatusBar.-pending { background: $accent 40%; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's)."""
    line: var[tuple[str, str]] = var(("idle", "loopdeck  reading…"))
    """(state, text) on screen: the bar redraws only when this changes."""

    def on_mount(self) -> None:
        self.clocks = Clocks()
        self.clocks.every_second(self, self._tick)

    def _tick(self) -> None:
        """Ages what waits for a time (a pending command, a usage limit's reset)."""
        snapshot = self.snapshot
        if snapshot is not None and (snapshot.pending or limit_text(snapshot, clock_of(self))):
            self.line = bar_line(snapshot, clock_of(self))

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            self.line = ("idle", "loopdeck  reading…")
        else:
            self.line = bar_line(snapshot, clock_of(self))

    def watch_line(self, line: tuple[str, str]) -> None:
        state, text = line
        for name in STATES:
            self.set_class(name == state, f"-{name}")
        self.update(text, layout=False)  # one line, always: no layout to redo


def bar_line(snapshot: Snapshot, now: datetime) -> tuple[str, str]:
    """(state, the bar's text) for a snapshot at `now`."""
    state, text = describe(snapshot)
    limit = limit_text(snapshot, now)
    if limit:
        text = f"{text} · {limit}"
    waiting = pending_text(snapshot, now)
    if waiting:
        state = "pending"
        text = f"{text} · {waiting}"
    return state, f"loopdeck  {text}"


WORDS = {
    "pause": "PAUSING",
    "resume": "RESUMING",
    "stop": "STOPPING",
    "complete": "COMPLETING",
    "skip": "SKIPPING",
}


def limit_text(snapshot: Snapshot, now: datetime) -> str:
    """`usage limit · resets in 4m 12s`: the loop waits for the agent's limit to reset."""
    loop = snapshot.loop
    waiting = loop.waiting_for if loop is not None else None
    if not waiting or waiting.get("kind") != "usage-limit":
        return ""
    until = parse_iso(str(waiting.get("until", "")))
    if until is None:
        return "usage limit · waiting"
    left = int((until - now).total_seconds())
    return f"usage limit · resets in {human_duration(left)}" if left > 0 else "usage limit · resetting"


def pending_text(snapshot: Snapshot, now: datetime) -> str:
    """`pause pending 12s`: sent, not applied yet; the driver applies it at its next step."""
    if snapshot.loop is None or not snapshot.pending:
        return ""
    parts = []
    for command in snapshot.pending:
        moment = parse_iso(command.ts)
        age = human_duration(max(0, int((now - moment).total_seconds()))) if moment else "?"
        parts.append(f"{command.kind} pending {age}")
    return ", ".join(parts)


def _name(snapshot: Snapshot) -> str:
    """The project's folder name: the full path is one `loopdeck status` away."""
    return Path(snapshot.workspace).name


def _queued(snapshot: Snapshot) -> str:
    """The latest pending command that changes what the loop is doing ("" when none)."""
    kinds = [c.kind for c in snapshot.pending if c.kind in ("pause", "stop", "complete")]
    return kinds[-1] if kinds else ""


def describe(snapshot: Snapshot) -> tuple[str, str]:
    """(state class, one line) for the bar."""
    if snapshot.error is not None:
        return "error", f"STATE FILE CORRUPT · {_name(snapshot)}"
    loop = snapshot.loop
    if loop is None:
        if snapshot.archive:
            outcome = str(snapshot.archive.get("outcome", "completed"))
            its = snapshot.archive.get("iterations", "?")
            return "completed", f"{outcome.upper()} after {its} iterations · {_name(snapshot)}"
        return "idle", f"no loop · {_name(snapshot)}"
    of = f"{loop.iteration}/{loop.max_iterations}" if loop.max_iterations else f"{loop.iteration}"
    if snapshot.escalation is not None and loop.status in ("paused", "running"):
        state, word = "escalated", "ESCALATED"
    elif loop.status in ("running", "initializing") and _queued(snapshot) in WORDS:
        state, word = "paused", WORDS[_queued(snapshot)]  # never RUNNING over a queued pause
    elif loop.status in ("running", "initializing"):
        state, word = "running", "RUNNING"
    elif loop.status == "paused" and (loop.waiting_for or {}).get("kind") == "question":
        # the agent's question: the bar says how to answer it, also once its prompt was put off
        answered = any(c.kind == "answer" for c in snapshot.pending)
        state, word = "paused", "QUESTION" if answered else 'QUESTION · loopdeck answer "…"'
    elif loop.status in ("paused", "stopping"):
        state, word = "paused", loop.status.upper()
    elif loop.status == "failed":
        state, word = "failed", "FAILED"
    elif loop.status == "completed":
        state, word = "completed", "COMPLETED"
    else:
        state, word = "paused", loop.status.upper()
    driver = loop.driver or "no driver yet"
    if loop.pid is not None and not loop.alive:  # alive goes without saying beside RUNNING
        driver += " not running"
    mode = f" · verification {loop.verification_loop}/{loop.verify_loops}" if loop.verification_mode else ""
    if loop.sandbox is not None:  # the runner's turns: confined, or said plainly that they are not
        driver += " · sandboxed" if not loop.sandbox.startswith("off") else " · NO SANDBOX"
    return state, f"{word} · iteration {of}{mode} · {driver} · {_name(snapshot)}"

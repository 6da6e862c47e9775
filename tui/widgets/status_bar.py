"""The top line: the loop's state at a glance, coloured by status."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from textual.widgets import Static

from loop.snapshot import Snapshot

STATES = ("running", "paused", "escalated", "failed", "completed", "idle", "error")


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; padding: 0 1; background: $panel; color: $text; text-style: bold; }
    StatusBar.-running { background: $success 40%; }
    StatusBar.-paused { background: $warning 40%; }
    StatusBar.-escalated { background: $error 60%; }
    StatusBar.-failed, StatusBar.-error { background: $error 80%; }
    StatusBar.-completed { background: $primary 50%; }
    StatusBar.-idle { background: $panel; }
    """

    def show(self, snapshot: Snapshot, now: datetime) -> None:
        state, text = describe(snapshot)
        for name in STATES:
            self.set_class(name == state, f"-{name}")
        self.update(f"loopdeck  {text}")


def _name(snapshot: Snapshot) -> str:
    """The project's folder name: the full path is one `loopdeck status` away."""
    return Path(snapshot.workspace).name


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
    elif loop.status in ("running", "initializing"):
        state, word = "running", "RUNNING"
    elif loop.status in ("paused", "stopping"):
        state, word = "paused", loop.status.upper()
    elif loop.status == "failed":
        state, word = "failed", "FAILED"
    elif loop.status == "completed":
        state, word = "completed", "COMPLETED"
    else:
        state, word = "paused", loop.status.upper()
    driver = loop.driver or "no driver yet"
    if loop.pid is not None:
        driver += " alive" if loop.alive else " GONE"
    mode = f" · verification {loop.verification_loop}/{loop.verify_loops}" if loop.verification_mode else ""
    return state, f"{word} · iteration {of}{mode} · {driver} · {_name(snapshot)}"

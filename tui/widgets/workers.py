"""Parallel workers (`run --workers N`): who works on which task, the files each holds, for
how long, how many turns, in what state; and the lock table. Hidden when the loop has no
workers, so single-agent loops look as they always did.

Keys act on the selected worker only (skip its task, stop it), as control-queue commands with
the worker as their target: the monitor never touches a worker or the graph itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from loop import control
from loop.errors import LoopdeckError
from loop.journal import Journal
from loop.paths import Workspace
from loop.snapshot import Snapshot
from loop.timeutil import parse_iso
from tui.widgets.common import clip, duration


class WorkersPanel(Vertical):
    DEFAULT_CSS = """
    WorkersPanel { display: none; border: round $primary 50%; padding: 0 1; height: auto; max-height: 18; }
    WorkersPanel.-shown { display: block; }
    WorkersPanel DataTable { height: auto; max-height: 13; overflow-x: hidden; }
    """

    BINDINGS = [
        Binding("k", "skip_worker", "Skip its task", id="worker.skip"),
        Binding("w", "stop_worker", "Stop worker", id="worker.stop"),
        Binding("a", "answer_worker", "Answer worker", id="worker.answer"),
    ]

    def __init__(self, workspace: Workspace | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workspace = workspace
        self.rows: list[str] = []
        """Worker names in row order: the keys act on the row under the cursor."""
        self.section: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        table: DataTable[str] = DataTable(id="workers-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(id="workers-locks")

    def on_mount(self) -> None:
        self.border_title = "Workers"
        self.query_one(DataTable).add_columns("task", "worker", "files locked", "elapsed", "turns", "status")

    def show(self, snapshot: Snapshot, now: datetime) -> None:
        section = snapshot.parallel if snapshot.loop is not None else None
        self.set_class(section is not None, "-shown")
        if section is None:
            return
        self.section = section
        workers = [w for w in section.get("workers") or [] if isinstance(w, dict)]
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        self.rows = []
        for worker in workers:
            started = parse_iso(str(worker.get("started", "")))
            elapsed = duration((now - started).total_seconds()) if started else "?"
            table.add_row(
                clip(str(worker.get("task", "?")), 8),
                str(worker.get("name", "?")),
                clip(", ".join(str(f) for f in worker.get("files") or []) or "-", 34),
                elapsed,
                str(worker.get("turns", 1)),
                str(worker.get("status", "?")),
            )
            self.rows.append(str(worker.get("name")))
        if not workers:
            table.add_row("-", "no worker running", "", "", "", "")
        elif 0 <= cursor < len(workers):
            table.move_cursor(row=cursor)
        locks = section.get("locks") or {}
        lines = (
            [f"{name} → {holder}" for name, holder in sorted(locks.items())]
            if isinstance(locks, dict)
            else []
        )
        deferred = [str(d.get("line")) for d in section.get("deferred") or [] if isinstance(d, dict)]
        text = "locks: " + (", ".join(lines) if lines else "none")
        if deferred:
            text += "\n" + "\n".join(deferred[:4])
        self.query_one("#workers-locks", Static).update(text)
        streak = section.get("defer_streak", 0)
        self.border_subtitle = f"{len(workers)}/{section.get('capacity', '?')} busy · defer streak {streak}"

    def selected(self) -> str | None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        return self.rows[row] if 0 <= row < len(self.rows) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("skip_worker", "stop_worker"):
            return self.selected() is not None and self.workspace is not None
        if action == "answer_worker":
            return self._selected_worker().get("status") == "question" and self.workspace is not None
        return True

    def _selected_worker(self) -> dict[str, Any]:
        name = self.selected()
        for worker in (self.section or {}).get("workers") or []:
            if isinstance(worker, dict) and worker.get("name") == name:
                return worker
        return {}

    def action_answer_worker(self) -> None:
        from tui.screens.text import QuestionScreen

        worker = self._selected_worker()
        name = str(worker.get("name", ""))

        def answered(text: str | None) -> None:
            if text:
                self._send("resume", reason=text, name=name)

        self.app.push_screen(QuestionScreen(str(worker.get("question") or "?")), answered)

    def action_skip_worker(self) -> None:
        self._send("skip")

    def action_stop_worker(self) -> None:
        self._send("stop")

    def _send(self, kind: str, reason: str | None = None, name: str | None = None) -> None:
        name = name or self.selected()
        if name is None or self.workspace is None:
            return
        try:
            command = control.send(self.workspace, kind, source="tui", target=name, reason=reason)
        except (LoopdeckError, OSError) as exc:
            self.notify(f"{kind} not sent: {exc}", severity="error")
            return
        Journal(self.workspace.journal).append(
            "command-sent", None, {"id": command.id, "command": kind, "source": "tui", "worker": name}
        )
        self.notify(f"{kind} sent to {name}", title="loopdeck")

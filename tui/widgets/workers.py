"""Parallel workers (`run --workers N`): who works on which task, the files each holds, for
how long, how many turns, in what state; and the lock table. Hidden when the loop has no
workers, so single-agent loops look as they always did.

Keys act on the selected worker only (skip its task, stop it), as control-queue commands with
the worker as their target: the monitor never touches a worker or the graph itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import var
from textual.widgets import DataTable, Static

from loop.core.errors import LoopdeckError
from loop.core.timeutil import parse_iso
from loop.store import control
from loop.store.paths import Workspace
from loop.views.snapshot import Snapshot
from tui import actions
from tui.widgets.clocks import Clocks
from tui.widgets.common import clip, clock_of, duration, set_border

IDLE = ("queued", "ready")
"""Workers that hold no slot: their branch waits for the merge train, or their turn to be admitted."""


@dataclass(frozen=True)
class WorkersView:
    """What the panel shows: equal views draw nothing."""

    names: tuple[str, ...]
    """Worker names in row order: the keys act on the row under the cursor."""
    rows: tuple[tuple[str, ...], ...]
    locks: str
    subtitle: str


def workers_view(snapshot: Snapshot, now: datetime) -> WorkersView | None:
    """The workers of a parallel loop at `now` (None for any other loop)."""
    section = snapshot.parallel if snapshot.loop is not None else None
    if section is None:
        return None
    names, rows = [], []
    for worker in section.get("workers") or []:
        if not isinstance(worker, dict):
            continue
        started = parse_iso(str(worker.get("started", "")))
        elapsed = duration((now - started).total_seconds()) if started else "?"
        names.append(str(worker.get("name")))
        rows.append(
            (
                clip(str(worker.get("task", "?")), 8),
                str(worker.get("name", "?")),
                clip(", ".join(str(f) for f in worker.get("files") or []) or "-", 34),
                elapsed,
                str(worker.get("turns", 1)),
                str(worker.get("status", "?")) + (f" · {worker['rework']}" if worker.get("rework") else ""),
            )
        )
    # Most wanted first: a short terminal shows the first lines only (the table already says
    # which files each worker holds).
    locks = section.get("locks") or {}
    held = sorted(locks.items()) if isinstance(locks, dict) else []
    lines = [f"{name} → {holder}" for name, holder in held]
    deferred = [str(d.get("line")) for d in section.get("deferred") or [] if isinstance(d, dict)]
    first: list[str] = []
    later = ["locks: " + (", ".join(lines) if lines else "none")]
    if section.get("isolation") == "worktree":
        branch = next((str(w.get("branch")) for w in section.get("workers") or [] if w.get("branch")), "")
        pattern = branch.rsplit("/", 1)[0] + "/<task>" if branch else "loopdeck/…/<task>"
        tasks = {str(w.get("name")): str(w.get("task")) for w in section.get("workers") or []}
        queue = [f"task {tasks.get(str(q), '?')} ({q})" for q in section.get("queue") or []]
        into = f"{section.get('loop_branch') or '?'} ({section.get('strategy') or 'merge'})"
        first.append(f"merge queue: {' → '.join(queue) if queue else 'empty'}")
        later.insert(0, f"branches {pattern} → {into}")
    text = "\n".join([*first, *deferred[:4], *later])
    streak = section.get("defer_streak", 0)
    active = [w for w in section.get("workers") or [] if isinstance(w, dict) and w.get("status") not in IDLE]
    subtitle = f"{len(active)}/{section.get('capacity', '?')} busy · defer streak {streak}"
    return WorkersView(tuple(names), tuple(rows), text, subtitle)


class WorkersPanel(Vertical):
    DEFAULT_CSS = """
    WorkersPanel { display: none; border: round $primary 50%; padding: 0 1; height: auto; max-height: 18; }
    WorkersPanel.-shown { display: block; }
    WorkersPanel DataTable { height: auto; max-height: 13; overflow-x: hidden; }
    """

    BINDINGS = actions.bindings("workers")

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's)."""
    view: var[WorkersView | None] = var(None, init=False)
    """The table and the locks on screen (None: not a parallel loop, the panel is hidden)."""

    @property
    def workspace(self) -> Workspace | None:
        """Where the commands go: the workspace on screen (the monitor can switch folders)."""
        return Workspace(Path(self.snapshot.workspace)) if self.snapshot is not None else None

    @property
    def rows(self) -> list[str]:
        """Worker names in row order: the keys act on the row under the cursor."""
        return list(self.view.names) if self.view else []

    @property
    def section(self) -> dict[str, Any] | None:
        return self.snapshot.parallel if self.snapshot is not None else None

    def compose(self) -> ComposeResult:
        table: DataTable[str] = DataTable(id="workers-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(id="workers-locks")

    shown: list[str] = []
    """Worker names in the table's rows now (the view may be newer)."""

    def on_mount(self) -> None:
        self.border_title = "Workers"
        self.query_one(DataTable).add_columns("task", "worker", "files locked", "elapsed", "turns", "status")
        self.clocks = Clocks()
        self.clocks.every_second(self, self._tick)

    def _tick(self) -> None:
        """Ages each worker's elapsed time."""
        if self.snapshot is not None and self.snapshot.parallel is not None:
            self.view = workers_view(self.snapshot, clock_of(self))

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        self.view = workers_view(snapshot, clock_of(self)) if snapshot is not None else None

    def watch_view(self, view: WorkersView | None) -> None:
        self.set_class(view is not None, "-shown")
        if view is None:
            self.shown = []
            return
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        chosen = self.shown[cursor] if 0 <= cursor < len(self.shown) else None
        table.clear()
        for row in view.rows:
            table.add_row(*row)
        self.shown = list(view.names)
        if chosen in self.shown:  # the same worker stays selected as rows come and go
            cursor = self.shown.index(chosen)
        if not view.rows:
            table.add_row("-", "no worker running", "", "", "", "")
        elif cursor >= 0:
            table.move_cursor(row=min(cursor, len(view.rows) - 1))
        self.query_one("#workers-locks", Static).update(view.locks)
        set_border(self, subtitle=f"{self.keys_text()} · {view.subtitle}")

    def keys_text(self) -> str:
        """`k skip task · w stop worker`: the selected worker's keys, as bound now, on the
        panel's edge (the footer's room on 80 columns is the loop's keys')."""
        keymap = getattr(self.app, "keymap", {})
        answer = self._selected_worker().get("status") == "question"
        parts = []
        for key in actions.in_scope("workers"):
            if key.id == "worker.answer" and not answer:
                continue
            bound = actions.key_names(keymap.get(key.id, key.key)).split(",")[0]
            parts.append(f"{bound} {key.label.lower()}")
        return " · ".join(parts)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Another worker selected: its keys on the edge, its turn in the output panel."""
        if self.view is not None:
            set_border(self, subtitle=f"{self.keys_text()} · {self.view.subtitle}")
        self.post_message(self.Selected(self.selected()))

    class Ask(Message):
        """A worker's question for the person: the app asks it (a panel opens no screen)."""

        def __init__(self, question: str, answered: Callable[[str | None], None]) -> None:
            super().__init__()
            self.question = question
            self.answered = answered

    class Selected(Message):
        """The worker under the cursor (None: none): the output panel follows its turn."""

        def __init__(self, name: str | None) -> None:
            super().__init__()
            self.name = name

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
        worker = self._selected_worker()
        name = str(worker.get("name", ""))

        def answered(text: str | None) -> None:
            if text:
                self._send("resume", reason=text, name=name)

        self.post_message(self.Ask(str(worker.get("question") or "?"), answered))

    def action_skip_worker(self) -> None:
        self._send("skip")

    def action_stop_worker(self) -> None:
        self._send("stop")

    def _send(self, kind: str, reason: str | None = None, name: str | None = None) -> None:
        name = name or self.selected()
        if name is None or self.workspace is None:
            return
        remote = getattr(self.app, "send_remote", None)
        if remote is not None:  # a loop on Temporal: the app signals its workflow
            remote(kind, reason=reason, target=name)
            return
        try:
            from loop.trust import key as trust_key

            control.queue(
                self.workspace,
                kind,
                source="tui",
                target=name,
                reason=reason,
                key=trust_key.for_person(self.workspace.root),  # signed: a person's command
            )
        except (LoopdeckError, OSError) as exc:
            self.notify(f"{kind} not sent: {exc}", severity="error")
            return
        self.notify(f"{kind} sent to {name}", title="loopdeck")

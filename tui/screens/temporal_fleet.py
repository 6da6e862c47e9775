"""The fleet of a Temporal server: one row per loop (its workflow), who needs a person first,
and each loop's workers; Enter opens the loop's monitor.

Rows come from the server's list of loops and each running loop's query, read by a thread
worker once a second (`loop.temporal.view.row`, the same `FleetRow` the folder fleet shows).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable, Static

from loop.core.timeutil import utcnow
from loop.views.fleet import FleetRow, sort_rows
from tui.screens.fleet import FleetBase, FleetTable
from tui.widgets.common import ago
from tui.widgets.footer import Footer

if TYPE_CHECKING:
    from loop.temporal.client import Remote

POLL_S = 1.0
COLUMNS = (
    ("Loop", 34),
    ("Status", 22),
    ("Iter.", 7),
    ("Pending", 7),
    ("Waiting for", 18),
    ("Workers", 30),
    ("Last event", 12),
)


class TemporalFleetScreen(FleetBase):
    """A Temporal server's loops, a row each; Enter opens the one under the cursor."""

    class Open(Message):
        """A person chose a loop: the app shows its monitor."""

        def __init__(self, workflow_id: str) -> None:
            super().__init__()
            self.workflow_id = workflow_id

    class RowsRead(Message):
        def __init__(self, rows: list[tuple[FleetRow, str]], problem: str | None) -> None:
            super().__init__()
            self.rows = rows
            self.problem = problem

    def __init__(self, remote: Remote, *, clock: Callable[[], datetime] = utcnow, poll: bool = True) -> None:
        super().__init__()
        self.remote = remote
        self.clock = clock
        self.polling = poll
        self.rows: list[tuple[FleetRow, str]] = []
        self.problem: str | None = None
        self.busy = False
        self.reads = 0

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-bar", markup=False)
        table = FleetTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        for label, width in COLUMNS:
            table.add_column(label, width=width, key=label)
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(Static).update(f"loopdeck fleet · {self.remote.target.address} · reading…")
        self.start_read()
        if self.polling:
            self.set_interval(POLL_S, self.start_read)

    def start_read(self) -> None:
        """A read of the server's loops, one at a time, and only while the fleet is on screen
        (behind a loop's monitor it would query every running loop each second for nobody)."""
        if not self.busy and self.is_current:
            self.busy = True
            self.read_rows()

    def on_screen_resume(self) -> None:
        self.start_read()  # back in front: fresh rows at once

    @work(thread=True, group="temporal-fleet", exit_on_error=False)
    def read_rows(self) -> None:
        from loop.core.errors import LoopdeckError
        from loop.temporal import view

        rows: list[tuple[FleetRow, str]] = []
        problem = None
        try:
            for listed in self.remote.loops():
                wf = str(listed["workflow_id"])
                answer: dict[str, Any] | None = None
                if listed.get("status") == "running":
                    try:
                        answer = self.remote.read(wf)
                    except LoopdeckError:
                        answer = None
                rows.append((view.row(wf, listed, answer), _workers(answer)))
        except (LoopdeckError, TimeoutError) as exc:
            problem = str(exc) or "the server did not answer in time"
        except Exception as exc:  # any other: said on the bar, and the next poll reads again
            problem = f"{type(exc).__name__}: {exc}"
        self.post_message(self.RowsRead(rows, problem))

    def on_temporal_fleet_screen_rows_read(self, message: RowsRead) -> None:
        self.busy = False
        self.reads += 1
        self.rows = message.rows
        self.problem = message.problem
        self.redraw()

    def redraw(self) -> None:
        table = self.query_one(DataTable)
        order = {id(r): i for i, r in enumerate(sort_rows([r for r, _ in self.rows]))}
        rows = sorted(self.rows, key=lambda pair: order[id(pair[0])])
        key = None
        if table.row_count and table.cursor_row < table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear()
        now = self.clock()
        for row, workers in rows:
            table.add_row(*self.cells(row, workers, now), key=row.folder)
        keys = [r.folder for r, _ in rows]
        if key in keys:
            table.move_cursor(row=keys.index(key), animate=False)
        waiting = sum(1 for r, _ in rows if r.needs_person)
        bar = self.query_one("#fleet-bar", Static)
        bar.set_class(waiting > 0 or self.problem is not None, "-attention")
        text = (
            f"loopdeck fleet · {self.remote.target.address} · {len(rows)} loop{'s' if len(rows) != 1 else ''}"
        )
        if waiting:
            text += f" · {waiting} need{'s' if waiting == 1 else ''} a person"
        if self.problem:
            text += f" · {self.problem}"
        bar.update(text)
        self.refresh_bindings()

    @staticmethod
    def cells(row: FleetRow, workers: str, now: datetime) -> tuple[str, ...]:
        limit = f"/{row.max_iterations}" if row.max_iterations else ""
        status = ("● " if row.needs_person else "") + row.status
        return (
            row.folder,
            status,
            "-" if row.iteration is None else f"{row.iteration}{limit}",
            "-" if row.pending is None else str(row.pending),
            row.waiting_for or "-",
            workers or "-",
            ago(row.last_event, now) if row.last_event else "-",
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open":
            return self.is_mounted and self.query_one(DataTable).row_count > 0
        return True

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            value = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            if value:
                self.post_message(self.Open(value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()


def _workers(answer: dict[str, Any] | None) -> str:
    """`worker-3 (2, running), worker-4 (3, question)`: each worker, its task and status."""
    if not answer or not isinstance(answer.get("state"), dict):
        return ""
    from loop.core.scheduler import board_of
    from loop.temporal.protocol import state_from

    board = board_of(state_from(answer["state"]))
    return ", ".join(f"{w.name} ({w.task}, {w.status})" for w in board.workers)

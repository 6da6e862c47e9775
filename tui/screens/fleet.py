"""The fleet: one row per loop across many workspaces, who needs a person first.

Rows come from `loop.views.fleet` (the same readers as `status`). The screen owns its clock: every
2 s a worker `stat`s each workspace's loop files and reads again only the folders that
changed. The "Last event" ages change once a minute, all at once (`minutes_ago`). A loop that newly
needs a person (paused, waiting, escalated, failed, unreadable) rings the bell once.

A modal screen: the monitor's steering keys apply to one loop, never to a whole fleet.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from rich.color import Color
from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.renderables.sparkline import Sparkline as Spark
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from loop.core.timeutil import utcnow
from loop.views import fleet
from loop.views.fleet import FleetRow
from tui import actions
from tui.widgets.common import minutes_ago
from tui.widgets.footer import Footer

TREND = "Trend"
TREND_WIDTH = 7
"""The sparkline's cells: the loop's tests failing (or tasks open) over its recent iterations."""
LOW, HIGH = Color.parse("#4ebf71"), Color.parse("#e06c75")
"""The sparkline at its lowest (green: fewest failing) and at its highest (red)."""
POLL_S = 2.0
"""How often the fleet looks at every workspace (a few `stat`s each): a loop that needs a person
shows within 2 s; looking every second cost an idle fleet of 200 loops a third more."""
RESCAN_S = 60.0
"""A `--scan` fleet looks for new loops this often (a walk of the tree, bounded in depth)."""
COLUMNS = (
    ("Folder", 12),
    ("Loop", 18),
    ("Status", 20),
    ("Iter.", 7),
    ("Pending", 7),
    (TREND, TREND_WIDTH),
    ("Waiting for", 12),
    ("Last event", 11),
    ("Cost", 7),
)
"""(label, width): fixed widths, so a row arriving never shifts the columns."""
WIDE = sum(width + 2 for _, width in COLUMNS)
"""The cells the wide table takes (each column has a cell of padding either side)."""
NARROW_COLUMNS = (
    ("Folder\nloop", 0),
    ("Status", 10),
    ("Iter.", 5),
    ("Pending", 7),
    ("Waiting\nfor", 10),
    ("Last\nevent", 10),
    ("Cost", 6),
)
"""Below `WIDE` cells (80 columns): two lines a row, every column kept: the loop's kind under
its folder, "read-only" (or the trend's sparkline) under its status, two-line headers; the
folder's column takes what the others leave (0 here)."""


def sparkline(values: Sequence[float], width: int) -> RenderableType:
    """Textual's sparkline of a row's trend, `width` cells: green at its lowest, red at its
    highest (more tests failing, more tasks open); one value is drawn flat."""
    data = list(values) if len(values) > 1 else list(values) * 2
    return Spark(data, width=min(width, len(data)), min_color=LOW, max_color=HIGH)


class FleetTable(DataTable[RenderableType]):
    """The fleet's rows; Enter (shown in the footer) opens the loop under the cursor."""

    BINDINGS = actions.bindings("fleet", only={"select_cursor"})


class FleetBase(ModalScreen[None]):
    """What the folder fleet and a Temporal server's fleet share: their look and their keys."""

    DEFAULT_CSS = """
    FleetBase { background: $background; align: left top; }
    FleetBase #fleet-bar { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    FleetBase #fleet-bar.-attention { background: $warning 50%; }
    FleetBase DataTable { height: 1fr; }
    """
    BINDINGS = actions.bindings("fleet", skip={"select_cursor"})


class FleetScreen(FleetBase):
    class Open(Message):
        """A person chose a loop: the app shows its monitor."""

        def __init__(self, folder: Path, kind: str) -> None:
            super().__init__()
            self.folder = folder
            self.kind = kind

    class RowsRead(Message):
        def __init__(
            self, folders: list[Path], rows: dict[Path, list[FleetRow]], stamps: dict[Path, object]
        ) -> None:
            super().__init__()
            self.folders = folders
            self.rows = rows
            self.stamps = stamps

    def __init__(
        self,
        folders: Sequence[Path] = (),
        *,
        scan_root: Path | None = None,
        depth: int = fleet.MAX_DEPTH,
        clock: Callable[[], datetime] = utcnow,
        poll: bool = True,
    ) -> None:
        super().__init__()
        self.folders = [f.resolve() for f in folders]
        self.scan_root = scan_root.resolve() if scan_root else None
        self.depth = depth
        self.clock = clock
        self.polling = poll
        self.rows: dict[Path, list[FleetRow]] = {}
        self.stamps: dict[Path, object] = {}
        self.busy = False
        self.scanned_at: float | None = None
        self.needing: set[tuple[str, str]] | None = None
        """Loops that need a person, as of the last read (None before the first read)."""
        self.bells = 0
        self.reads = 0
        self.ticks = 0
        self.aged_at: int | None = None
        """The clock's minute the "Last event" ages were worked out at (they change only when it
        turns: `minutes_ago`)."""

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-bar", markup=False)
        table = FleetTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        self.set_columns(table, narrow=False)
        yield table
        yield Footer()

    narrow: bool | None = None
    """Whether the table has its two-line columns (None before it has any)."""

    def set_columns(
        self, table: DataTable[RenderableType], narrow: bool, width: int = 80, scrolls: bool = False
    ) -> None:
        """The wide table's columns, or the narrow one's: the folder's column fitted to `width`,
        less a scrollbar's two cells when the rows will not all fit (`scrolls`)."""
        self.narrow = narrow
        table.clear(columns=True)
        if not narrow:
            table.header_height = 1
            for label, size in COLUMNS:
                table.add_column(label, width=size, key=label.split("\n")[0])
            return
        table.header_height = 2
        others = sum(size + 2 for _, size in NARROW_COLUMNS[1:])
        for label, size in NARROW_COLUMNS:
            key = "Folder" if size == 0 else label.replace("\n", " ")
            table.add_column(label, width=size or max(8, width - others - (4 if scrolls else 2)), key=key)

    def on_resize(self) -> None:
        table = self.query_one(DataTable)
        narrow = self.size.width < WIDE
        if narrow != self.narrow or narrow:
            self.set_columns(table, narrow, self.size.width)
            if self.reads:
                self.redraw()

    def on_mount(self) -> None:
        self.query_one(Static).update("loopdeck fleet · reading…")
        self.start_read()
        if self.polling:
            self.set_interval(POLL_S, self.tick)

    def tick(self) -> None:
        self.ticks += 1
        if not self.busy:
            self.start_read()
        if self.aged_at is not None and self.minute() != self.aged_at:
            self.refresh_ages()

    def minute(self) -> int:
        return int(self.clock().timestamp() // 60)

    def start_read(self) -> None:
        self.busy = True
        rescan = self.scan_root is not None and (
            self.scanned_at is None or time.monotonic() - self.scanned_at > RESCAN_S
        )
        if rescan:
            self.scanned_at = time.monotonic()
        self.read_changed(list(self.folders), dict(self.stamps), rescan)

    @work(thread=True, group="fleet", exit_on_error=False, description="the fleet's read")
    def read_changed(self, folders: list[Path], stamps: dict[Path, object], rescan: bool) -> None:
        if rescan and self.scan_root is not None:
            folders = fleet.scan(self.scan_root, self.depth)
        rows: dict[Path, list[FleetRow]] = {}
        new_stamps: dict[Path, object] = {}
        for folder in folders:
            stamp = fleet.stamp(folder)
            new_stamps[folder] = stamp
            if stamps.get(folder) != stamp:
                rows[folder] = fleet.read_rows(folder)
        self.post_message(self.RowsRead(folders, rows, new_stamps))

    def on_fleet_screen_rows_read(self, message: RowsRead) -> None:
        self.busy = False
        self.reads += 1
        self.folders = message.folders
        self.stamps = message.stamps
        self.rows.update(message.rows)
        for gone in set(self.rows) - set(self.folders):
            del self.rows[gone]
        needing = {(r.folder, r.kind) for r in self.all_rows() if r.needs_person}
        if self.needing is not None and needing - self.needing:
            self.bells += 1
            self.app.bell()
        self.needing = needing
        if message.rows or self.reads == 1:
            self.redraw()

    def on_unmount(self) -> None:
        self.busy = False

    # --- drawing ------------------------------------------------------------------------------

    def all_rows(self) -> list[FleetRow]:
        return fleet.sort_rows([row for rows in self.rows.values() for row in rows])

    def base(self) -> str:
        if self.scan_root is not None:
            return str(self.scan_root)
        if len(self.folders) > 1:
            return os.path.commonpath([str(f) for f in self.folders])
        return str(self.folders[0].parent) if self.folders else ""

    def redraw(self) -> None:
        table = self.query_one(DataTable)
        rows = self.all_rows()
        now = self.clock()
        self.aged_at = int(now.timestamp() // 60)
        key = None
        if table.row_count and table.cursor_row < table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if self.narrow:  # the folder's column as wide as the rows leave it
            scrolls = 2 * len(rows) + table.header_height > table.size.height
            self.set_columns(table, True, self.size.width, scrolls)
        else:
            table.clear()
        base = self.base()
        for row in rows:
            cells: tuple[RenderableType, ...] = self.cells(row, base, now)
            if self.narrow:  # the kind under the folder, "read-only" or the trend under the status
                status, _, ro = str(cells[2]).partition(" (")
                under: RenderableType = status + ("\n" + ro.rstrip(")") if ro else "")
                if row.trend and not ro:
                    under = Group(Text(status), sparkline(row.trend, NARROW_COLUMNS[1][1]))
                cells = (f"{cells[0]}\n{cells[1]}", under, *cells[3:])
            else:
                cells = (*cells[:5], sparkline(row.trend, TREND_WIDTH) if row.trend else "-", *cells[5:])
            table.add_row(*cells, key=f"{row.folder}\0{row.kind}", height=2 if self.narrow else 1)
        if key is not None:
            keys = [f"{r.folder}\0{r.kind}" for r in rows]
            if key in keys:
                table.move_cursor(row=keys.index(key), animate=False)
        waiting = sum(1 for r in rows if r.needs_person)
        bar = self.query_one("#fleet-bar", Static)
        bar.set_class(waiting > 0, "-attention")
        where = f" below {self.scan_root.name}/" if self.scan_root else ""
        bar.update(
            f"loopdeck fleet · {len(rows)} loop{'s' if len(rows) != 1 else ''} in "
            f"{len(self.folders)} folder{'s' if len(self.folders) != 1 else ''}{where}"
            + (f" · {waiting} need{'s' if waiting == 1 else ''} a person" if waiting else "")
        )
        self.refresh_bindings()

    def refresh_ages(self) -> None:
        """Only the "Last event" column moves with the clock, once a minute: its cells alone are
        updated, and only those whose text changed."""
        table = self.query_one(DataTable)
        now = self.clock()
        self.aged_at = int(now.timestamp() // 60)
        for row in self.all_rows():
            text = minutes_ago(row.last_event, now) if row.last_event else "-"
            key = f"{row.folder}\0{row.kind}"
            if key in table.rows and table.get_cell(key, "Last event") != text:
                table.update_cell(key, "Last event", text)

    @staticmethod
    def cells(row: FleetRow, base: str, now: datetime) -> tuple[str, ...]:
        folder = row.folder[len(base) :].lstrip("/") if base and row.folder.startswith(base) else row.folder
        limit = f"/{row.max_iterations}" if row.max_iterations else ""
        status = row.status + (" (read-only)" if row.read_only else "")
        if row.needs_person:
            status = "● " + status
        return (
            folder or ".",
            row.kind,
            status,
            "-" if row.iteration is None else f"{row.iteration}{limit}",
            "-" if row.pending is None else str(row.pending),
            row.waiting_for or ("see the file" if row.problem else "-"),
            minutes_ago(row.last_event, now) if row.last_event else "-",
            "-" if row.cost_usd is None else f"${row.cost_usd:.2f}",
        )

    # --- keys ---------------------------------------------------------------------------------

    def selected(self) -> tuple[Path, str] | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        value = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or ""
        folder, _, kind = value.partition("\0")
        return Path(folder), kind

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open":
            return self.is_mounted and self.query_one(DataTable).row_count > 0
        return True

    def action_open(self) -> None:
        chosen = self.selected()
        if chosen is not None:
            self.post_message(self.Open(*chosen))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

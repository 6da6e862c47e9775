"""Verification: the mode (loop N of 4) and the last verification commands; Enter shows output."""

from __future__ import annotations

from datetime import datetime

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from loop.snapshot import Snapshot, Verification
from tui.widgets.common import clip


class VerificationPanel(Vertical):
    DEFAULT_CSS = """
    VerificationPanel { border: round $primary 50%; padding: 0 1; height: auto; max-height: 12; }
    VerificationPanel DataTable { height: auto; max-height: 7; overflow-x: hidden; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.results: tuple[Verification, ...] = ()
        """What the table shows, in row order: the Enter key opens one of these."""

    def compose(self) -> ComposeResult:
        yield Static(id="verification-mode")
        table: DataTable[str] = DataTable(id="verification-table", cursor_type="row", zebra_stripes=True)
        yield table

    def on_mount(self) -> None:
        self.border_title = "Verification"
        table = self.query_one(DataTable)
        table.add_columns("result", "command", "exit", "time")

    def show(self, snapshot: Snapshot, now: datetime) -> None:
        loop = snapshot.loop
        mode = self.query_one("#verification-mode", Static)
        if loop is None:
            mode.update("-")
        elif loop.verification_mode:
            mode.update(
                f"VERIFICATION MODE · loop {loop.verification_loop} of {loop.verify_loops} · "
                f"{loop.verification_remaining} remaining"
            )
        else:
            mode.update(f"work mode · {loop.verify_loops} verification loops once every source is empty")
        if snapshot.verifications == self.results:
            return
        self.results = snapshot.verifications
        table = self.query_one(DataTable)
        table.clear()
        for result in self.results:
            table.add_row(
                "PASS" if result.passed else "FAIL",
                clip(result.command, 26),
                "-" if result.exit_code is None else str(result.exit_code),
                "-" if result.duration_s is None else f"{result.duration_s:.1f}s",
            )
        if not self.results:
            table.add_row("-", "none run yet", "", "")
        self.border_subtitle = (
            f"{sum(r.passed for r in self.results)}/{len(self.results)} passing" if self.results else ""
        )

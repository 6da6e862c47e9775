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
        runs = history(snapshot)
        passed = sum(r.passed for r in runs)
        tally = f"{len(runs)} runs: {passed} passed, {len(runs) - passed} failed" if runs else "not run yet"
        if loop is None:
            mode.update(tally)
        elif loop.verification_mode:
            mode.update(
                f"VERIFYING · loop {loop.verification_loop} of {loop.verify_loops} · "
                f"{loop.verification_remaining} left\n{tally}"
            )
        else:
            mode.update(f"working · {loop.verify_loops} checks at the end\n{tally}")
        # A live loop shows each command's latest run; a finished one, its last runs.
        shown = snapshot.verifications if loop is not None else tuple(reversed(runs[-5:]))  # newest first
        if shown == self.results:
            return
        self.results = shown
        table = self.query_one(DataTable)
        table.clear()
        for result in self.results:
            table.add_row(
                "PASS" if result.passed else "FAIL",
                clip(result.command, 18),
                "-" if result.exit_code is None else str(result.exit_code),
                "-" if result.duration_s is None else f"{result.duration_s:.1f}s",
            )
        self.border_subtitle = (
            f"{sum(r.passed for r in self.results)}/{len(self.results)} passing" if self.results else ""
        )
        table.display = bool(self.results)


def history(snapshot: Snapshot) -> list[Verification]:
    """Every verification run in the journal's tail, oldest first (the snapshot keeps only
    each command's latest)."""
    runs = []
    for event in snapshot.events:
        if event.kind in ("verification-passed", "verification-failed"):
            code, took = event.data.get("exit_code"), event.data.get("duration_s")
            runs.append(
                Verification(
                    str(event.data.get("command", "?")),
                    event.kind == "verification-passed",
                    code if isinstance(code, int) else None,
                    float(took) if isinstance(took, int | float) else None,
                    str(event.data.get("tail", "")),
                    event.iteration,
                    event.ts,
                )
            )
    return runs

"""Verification: the mode (loop N of 4) and the last verification commands; Enter shows output."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import var
from textual.widgets import DataTable, Static

from loop.views.snapshot import Snapshot, Verification
from tui.widgets.common import clip


class VerificationPanel(Vertical):
    DEFAULT_CSS = """
    VerificationPanel { border: round $primary 50%; padding: 0 1; height: auto; max-height: 12; }
    VerificationPanel DataTable { height: auto; max-height: 7; overflow-x: hidden; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's)."""
    mode: var[str] = var("", init=False)
    """Working or verifying, and the tally of runs."""
    results: var[tuple[Verification, ...]] = var((), init=False)
    """What the table shows, in row order: the Enter key opens one of these."""

    def compose(self) -> ComposeResult:
        yield Static(id="verification-mode")
        table: DataTable[str] = DataTable(id="verification-table", cursor_type="row", zebra_stripes=True)
        yield table

    def on_mount(self) -> None:
        self.border_title = "Verification"
        table = self.query_one(DataTable)
        table.add_columns("result", "command", "exit", "time")

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            return
        loop = snapshot.loop
        runs = history(snapshot)
        passed = sum(r.passed for r in runs)
        tally = f"{len(runs)} runs: {passed} passed, {len(runs) - passed} failed" if runs else "not run yet"
        if loop is None:
            self.mode = tally
        elif loop.verification_mode:
            self.mode = (
                f"VERIFYING · loop {loop.verification_loop} of {loop.verify_loops} · "
                f"{loop.verification_remaining} left\n{tally}"
            )
        else:
            self.mode = f"working · {loop.verify_loops} checks at the end\n{tally}"
        # A live loop shows each command's latest run; a finished one, its last runs, newest first.
        self.results = snapshot.verifications if loop is not None else tuple(reversed(runs[-5:]))

    def watch_mode(self, mode: str) -> None:
        self.query_one("#verification-mode", Static).update(mode)

    def watch_results(self, results: tuple[Verification, ...]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for result in results:
            table.add_row(
                "PASS" if result.passed else "FAIL",
                clip(result.command, 18),
                "-" if result.exit_code is None else str(result.exit_code),
                "-" if result.duration_s is None else f"{result.duration_s:.1f}s",
            )
        self.border_subtitle = f"{sum(r.passed for r in results)}/{len(results)} passing" if results else ""
        table.display = bool(results)


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

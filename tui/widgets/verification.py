"""Verification: the mode (loop N of 4) and the last verification commands; Enter shows output."""

from __future__ import annotations

import shlex
from pathlib import PurePath

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import var
from textual.widgets import DataTable, Static

from loop.views.snapshot import Snapshot, Verification
from tui.widgets.common import clip

LONG_PATH = 20
"""A path argument longer than this is shown by its name alone."""


def command_label(command: str) -> str:
    """What a verification runs, as a person names it: its program and arguments, a long or
    absolute path shortened to its last part (`/tmp/x/.venv/bin/python /tmp/x/check.py -q` →
    `python check.py -q`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    shown = []
    for word in words:
        if "/" in word and (word.startswith(("/", "~")) or len(word) > LONG_PATH):
            word = PurePath(word.rstrip("/")).name or word
        shown.append(shlex.quote(word) if any(c.isspace() for c in word) else word)
    return " ".join(shown) or command


class VerificationPanel(Vertical):
    DEFAULT_CSS = """
    VerificationPanel { border: round $primary 50%; padding: 0 1; height: auto; max-height: 12; }
    VerificationPanel DataTable { height: auto; max-height: 7; overflow-x: hidden; display: none; }
    VerificationPanel DataTable.-shown { display: block; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's)."""
    mode: var[str] = var("", init=False)
    """Working or verifying, and the tally of runs."""
    results: var[tuple[Verification, ...]] = var((), init=False)
    """What the table shows, in row order: the Enter key opens one of these."""
    drawn_width = 0
    """The width the commands were cut at: a new width draws them again."""

    def compose(self) -> ComposeResult:
        yield Static(id="verification-mode")
        table: DataTable[str] = DataTable(
            id="verification-table", cursor_type="row", zebra_stripes=True, cell_padding=0
        )
        yield table

    def on_mount(self) -> None:
        self.border_title = "Verification"

    def on_resize(self) -> None:
        if self.content_size.width != self.drawn_width:
            self.watch_results(self.results)

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            return
        loop = snapshot.loop
        runs = history(snapshot)
        passed = sum(r.passed for r in runs)
        # Lines short enough for the narrow column (26 cells at 80 columns): nothing wraps.
        tally = f"runs: {passed} passed, {len(runs) - passed} failed" if runs else "not run yet"
        if loop is None:
            self.mode = tally
        elif loop.verification_mode:
            self.mode = (
                f"VERIFYING {loop.verification_loop} of {loop.verify_loops} · "
                f"{loop.verification_remaining} left\n{tally}"
            )
        elif snapshot.parallel is not None:  # a loop of workers checks each landing instead
            self.mode = f"checks at each landing\n{tally}"
        else:
            self.mode = f"working; then {loop.verify_loops} checks\n{tally}"
        # A live loop shows each command's latest run; a finished one, its last runs, newest first.
        self.results = snapshot.verifications if loop is not None else tuple(reversed(runs[-5:]))

    def watch_mode(self, mode: str) -> None:
        self.query_one("#verification-mode", Static).update(mode)

    def watch_results(self, results: tuple[Verification, ...]) -> None:
        """A row per command: PASS or FAIL with the exit code, the command by name, how long it
        took. Columns a space apart (cells padded by hand, not by the table's two cells): on a
        narrow panel the time gives way before the command is cut."""
        table = self.query_one(DataTable)
        width = self.drawn_width = self.content_size.width
        rows = [
            (
                "PASS" if r.passed else "FAIL" if r.exit_code is None else f"FAIL {r.exit_code}",
                command_label(r.command),
                "-" if r.duration_s is None else f"{r.duration_s:.1f}s",
            )
            for r in results
        ]
        verdict = max([len("result"), *(len(row[0]) for row in rows)]) + 1
        took = max([len("time"), *(len(row[2]) for row in rows)]) + 1
        longest = max([len("command"), *(len(row[1]) for row in rows)]) + 1
        timed = width <= 0 or verdict + longest + took <= width
        room = (width - verdict - (took if timed else 0) if width > 0 else longest) - 1
        columns = ("result", "command", "time") if timed else ("result", "command")
        if tuple(str(c.value) for c in table.columns) != columns:
            table.clear(columns=True)
            table.add_column("result".ljust(verdict), key="result")
            table.add_column("command", key="command")
            if timed:
                table.add_column("time".rjust(took), key="time")
        else:
            table.clear()
        for result, label, seconds in rows:
            cells = [result.ljust(verdict), clip(label, max(8, room)) + " "]
            table.add_row(*cells, *([seconds.rjust(took)] if timed else []))
        self.border_subtitle = f"{sum(r.passed for r in results)}/{len(results)} passing" if results else ""
        table.set_class(bool(results), "-shown")


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

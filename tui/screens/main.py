"""The main screen: the panels of one loop, and the keys that change what they show.

It reads nothing and sends nothing: the app sets `snapshot` and `git_status` when a read
arrives, every panel is bound to them, and the app's keys steer the loop. The screen's own keys
are views: a log full screen, a search, and Escape, which goes back from whichever of those is
open (the footer says so while there is somewhere to go back to).

Its classes drive the layout (`app.tcss`): `-workers` while the loop has parallel workers (on a
short terminal the panels a workers loop needs least give way), `-finished` once the loop is
archived, and the width and height breakpoints the app sets.
"""

from __future__ import annotations

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import DataTable, Input

from loop.repo.gitstate import GitStatus
from loop.views.progress import Series
from loop.views.snapshot import Snapshot
from tui import actions
from tui.screens.text import TextScreen
from tui.widgets.clocks import rest_clocks, wake_clocks
from tui.widgets.error import ErrorPanel
from tui.widgets.footer import Footer
from tui.widgets.git import GitPanel
from tui.widgets.iteration import IterationPanel
from tui.widgets.journal import JournalPanel
from tui.widgets.output import OutputPanel
from tui.widgets.progress import ProgressPanel
from tui.widgets.sources import SourcesPanel
from tui.widgets.status_bar import StatusBar
from tui.widgets.verification import VerificationPanel
from tui.widgets.workers import WorkersPanel

PALETTE_HINT_WIDTH = 100
"""Below this width the footer's palette hint gives its room to the keys."""


MAIN_SCOPES = ("app", "main", "monitor")
"""The registry's scopes whose keys the main screen holds: the loop's (run by the app), the
views', other loops' (the app's too)."""


class MainScreen(Screen[None]):
    BINDINGS = actions.bindings(*MAIN_SCOPES)
    """Every key of the main screen, in the registry's order (the footer's): the loop's keys name
    the app's actions (`app.pause`), so `check_action` there says when they apply."""
    ALLOW_IN_MAXIMIZED_VIEW = "Footer, StatusBar"
    """A log full screen keeps the top bar (the loop's state) and the footer (the way back)."""

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (set by the app). Every panel is bound to it and works out,
    and redraws, only the part it shows."""
    summary: var[Snapshot | None] = var(None, init=False)
    """`snapshot` as the summary panels see it (set by the app): every change, paced while a
    loop races (`tui.pace`); the journal, the output and the layout follow `snapshot` itself."""
    git_status: var[GitStatus | None] = var(None, init=False)
    """The repository as last read (by the app's own worker, on its own clock)."""
    progress: var[Series] = var(Series, init=False)
    """The loop's figures per iteration (set by the app, `tui.progress`): the progress panel's."""

    def compose(self) -> ComposeResult:
        snapshot = MainScreen.snapshot
        summary = {"snapshot": MainScreen.summary}
        yield StatusBar(id="status-bar").data_bind(**summary)
        yield ErrorPanel(id="error-panel").data_bind(snapshot)
        with Horizontal(id="panels"):
            with Vertical(id="left"):
                yield SourcesPanel(id="sources").data_bind(**summary)
                yield IterationPanel(id="iteration").data_bind(**summary)
            with Vertical(id="right"):
                yield VerificationPanel(id="verification").data_bind(**summary)
                yield GitPanel(id="git").data_bind(status=MainScreen.git_status)
                yield ProgressPanel(id="progress").data_bind(series=MainScreen.progress)
        yield WorkersPanel(id="workers").data_bind(**summary)
        with Horizontal(id="logs"):
            yield JournalPanel(id="journal").data_bind(snapshot)
            yield OutputPanel(id="output").data_bind(snapshot)
        yield Footer(compact=True)

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            return
        workers = snapshot.loop is not None and snapshot.parallel is not None
        if workers and not self.has_class("-workers"):
            self.call_after_refresh(self.focus_workers)
        self.set_class(workers, "-workers")
        self.set_class(snapshot.loop is None and bool(snapshot.archive), "-finished")

    def on_screen_suspend(self) -> None:
        """Behind another screen (the fleet, a neighbour's loop) the panels' clocks rest: nobody
        sees what they age; shown again, they tick at once."""
        rest_clocks(self)

    def on_screen_resume(self) -> None:
        wake_clocks(self)

    def focus_workers(self) -> None:
        """The workers' table takes the focus when it appears: its keys act on the selected
        worker, and the footer shows them (not while a search box has the keys)."""
        if not isinstance(self.focused, Input):
            self.query_one(WorkersPanel).query_one(DataTable).focus()

    def on_resize(self, event: events.Resize) -> None:
        """On a narrow terminal the footer's palette hint gives its room to the keys (quit
        last among them); ctrl+p still opens the palette, and the help says so."""
        self.query_one(Footer).show_command_palette = event.size.width >= PALETTE_HINT_WIDTH

    # --- keys ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_output":
            return self.snapshot is not None and self.snapshot.loop is not None  # a finished loop has none
        if action == "back":
            return self.back_to() is not None
        return True

    def back_to(self) -> str | None:
        """Where Escape goes now: out of a search, out of full screen, or to the screen behind
        this one (the fleet); None when there is nowhere to go (the key is not shown)."""
        if any(panel.searching for panel in (self.query_one(JournalPanel), self.query_one(OutputPanel))):
            return "search"
        if self.maximized is not None:
            return "full screen"
        return "behind" if getattr(self.app, "can_go_back", False) else None

    async def action_back(self) -> None:
        where = self.back_to()
        if where == "search":
            for panel in (self.query_one(JournalPanel), self.query_one(OutputPanel)):
                if panel.searching:
                    panel.clear_search()
        elif where == "full screen":
            self.minimize()
        elif where == "behind":
            await self.app.run_action("go_back")
        self.refresh_bindings()

    def action_toggle_output(self) -> None:
        self.full_screen(self.query_one(OutputPanel))

    def action_toggle_journal(self) -> None:
        self.full_screen(self.query_one(JournalPanel))

    def full_screen(self, panel: JournalPanel | OutputPanel) -> None:
        """The panel alone (the top bar and the footer stay); the same key again goes back, as
        does Escape."""
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(panel, container=False)
        self.refresh_bindings()

    def action_search(self) -> None:
        if self.maximized is self.query_one(OutputPanel):
            self.query_one(OutputPanel).start_search()
        else:
            self.query_one(JournalPanel).start_search()
        self.refresh_bindings()

    @on(WorkersPanel.Selected)
    def follow_worker(self, event: WorkersPanel.Selected) -> None:
        self.query_one(OutputPanel).worker = event.name

    @on(DataTable.RowSelected, "#verification-table")
    def show_verification_output(self, event: DataTable.RowSelected) -> None:
        panel = self.query_one(VerificationPanel)
        if 0 <= event.cursor_row < len(panel.results):
            result = panel.results[event.cursor_row]
            verdict = "PASSED" if result.passed else "FAILED"
            body = result.tail or "(no output)"
            self.app.push_screen(
                TextScreen(f"$ {result.command} · {verdict} (exit {result.exit_code})", body)
            )

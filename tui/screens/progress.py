"""The Progress view: the loop's charts per iteration (tasks, tests, cost so far, turn
durations), over the main screen.

A modal screen, as the fleet is: the main screen's steering keys do not reach through it. It
reads nothing: it follows the app's `progress` (read on the app's refresh path, `tui.progress`),
so it moves as the journal grows.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Static

from loop.views.progress import Series
from tui import actions
from tui.widgets.footer import Footer
from tui.widgets.progress import ProgressCharts


class ProgressScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ProgressScreen { background: $background; align: left top; }
    ProgressScreen #progress-bar { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    """
    BINDINGS = actions.bindings("progress")

    def compose(self) -> ComposeResult:
        yield Static("loopdeck progress · per iteration", id="progress-bar", markup=False)
        yield ProgressCharts(id="progress-charts")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        workspace = getattr(self.app, "workspace", None)
        name = f" · {workspace.root.name}" if workspace is not None else ""
        self.query_one("#progress-bar", Static).update(f"loopdeck progress{name} · per iteration")
        self.watch(self.app, "progress", self.show, init=True)

    def show(self, data: Series) -> None:
        self.query_one(ProgressCharts).series = data

    def action_close(self) -> None:
        self.dismiss(None)

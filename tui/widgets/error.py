"""A corrupt state file: where, what, and how to get the loop back."""

from __future__ import annotations

from textual.reactive import var
from textual.widgets import Static

from loop.views.snapshot import Snapshot
from tui.widgets.common import relative


class ErrorPanel(Static):
    """Shown only while the state file does not read."""

    DEFAULT_CSS = """
    ErrorPanel { display: none; border: thick $error; background: $error 15%; padding: 0 1; height: auto; }
    ErrorPanel.-shown { display: block; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the screen's)."""
    problem: var[str] = var("", init=False)
    """What the panel says ("" when the state file reads fine: the panel is hidden)."""

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        error = snapshot.error if snapshot is not None else None
        if snapshot is None or error is None:
            self.problem = ""
            return
        mend = (
            "Press b to restore this loop's backup, or run `loopdeck resume`."
            if snapshot.backup_exists
            else "`loopdeck resume` rebuilds the state from the journal."
        )
        self.problem = "\n".join(
            [
                "The loop's state file is corrupt and was left as it is.",
                f"file: {relative(error.path, snapshot.workspace)}",
                f"line: {error.line or '-'}",
                f"problem: {error.problem}",
                mend,
            ]
        )

    def watch_problem(self, problem: str) -> None:
        self.update(problem)
        self.set_class(bool(problem), "-shown")

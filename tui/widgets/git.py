"""Git: branch, HEAD, staged / modified / untracked, last commits, ahead / behind."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import var
from textual.widgets import Static

from loop.repo.gitstate import GitStatus
from tui.widgets.common import clip, update_static


class GitPanel(Static):
    DEFAULT_CSS = """
    GitPanel {
        border: round $primary 50%; padding: 0 1; height: auto;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    status: var[GitStatus | None] = var(None, init=False)
    """The repository as last read (bound to the app's): redrawn only when it changes."""

    def on_mount(self) -> None:
        self.border_title = "Git"
        self.update("reading git…")

    def watch_status(self, status: GitStatus | None) -> None:
        if status is None:
            update_static(self, "reading git…")
            return
        if status.error:
            update_static(self, status.error)
            return
        tracking = ""
        if status.ahead is not None:
            tracking = f" · ahead {status.ahead}, behind {status.behind}"
        lines = [
            f"{status.branch or '(detached)'} @ {status.head or 'no commits'}{tracking}",
            changes(status),
        ]
        lines += [f"{c.sha} {clip(c.summary, 72)}" for c in status.commits]
        # A line per fact or commit, cut at the panel's width when drawn (…, the panel's style),
        # whatever the width is when git answers.
        update_static(self, Text("\n".join(lines)))


def changes(status: GitStatus) -> str:
    """`uncommitted: 3 changed, 2 new`: the counts that are not zero."""
    counts = ((status.staged, "staged"), (status.modified, "changed"), (status.untracked, "new"))
    parts = ", ".join(f"{n} {word}" for n, word in counts if n)
    return f"uncommitted: {parts}" if parts else "no uncommitted changes"

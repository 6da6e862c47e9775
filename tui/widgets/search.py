"""The search box of a log panel (the journal, the output).

While it has the focus it takes the letters typed, so the monitor's one-letter keys are off; its
own keys (Enter keeps the filter, Escape clears it) are bindings, shown in the footer, which
would otherwise be blank.
"""

from __future__ import annotations

from textual.message import Message
from textual.widgets import Input

from tui import actions


class SearchInput(Input):
    BINDINGS = actions.bindings("search")

    class Cleared(Message):
        """Escape: the panel drops the filter and hides the box."""

    class Kept(Message):
        """Enter: the panel keeps the filter and gives the keys back to the screen."""

    def action_keep(self) -> None:
        self.post_message(self.Kept())

    def action_clear(self) -> None:
        self.post_message(self.Cleared())

"""The search box of a log panel (the journal, the output).

While it has the focus it takes the letters typed, so the monitor's one-letter keys are off; its
own keys (Enter keeps the filter, Escape clears it) are bindings, shown in the footer, which
would otherwise be blank.
"""

from __future__ import annotations

from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input

from tui import actions


class SearchInput(Input):
    BINDINGS = actions.bindings("search")

    class Cleared(Message):
        """Escape: the panel drops the filter and hides the box."""

    class Kept(Message):
        """Enter: the panel keeps the filter and gives the keys back to the screen."""

    came_from: Widget | None = None
    """What had the focus when the search opened: it gets it back (`give_back`), so the keys
    of a focused panel (the Workers panel's) work again after the search."""

    def open(self) -> None:
        """Take the focus, keeping where it was."""
        focused = self.screen.focused
        self.came_from = focused if focused is not self else self.came_from
        self.focus()

    def give_back(self) -> None:
        """The focus back where it was when the search opened (none, when that has gone or is
        hidden now)."""
        back, self.came_from = self.came_from, None
        shown = back is not None and back.is_attached and back in self.screen.focus_chain
        self.screen.set_focus(back if shown else None)  # never a panel hidden meanwhile

    def action_keep(self) -> None:
        self.post_message(self.Kept())

    def action_clear(self) -> None:
        self.post_message(self.Cleared())

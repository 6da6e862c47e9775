"""The footer every screen shows: Textual's, without what it kept of the keys it drew before."""

from __future__ import annotations

from typing import Any

from textual.dom import DOMNode
from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    """Textual's footer (Textual 8.2), which forgets the keys it no longer shows.

    Each key the footer draws follows the footer's `compact` through a watcher the footer holds.
    The keys on offer change (a loop paused, a command pending): the footer draws a new set,
    whose watchers are added to that list, and the old set's are never taken out (Textual prunes
    the list only when `compact` itself changes). Every change of the keys kept a footer's worth
    of dead widgets, their styles and drawn lines for good: memory a monitor left open for days
    only ever gained."""

    async def recompose(self) -> None:
        await super().recompose()
        forget_closed_watchers(self)
        self.call_after_refresh(self.fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        """Keys that would run past the right edge (a full-screen view's, on 80 columns) lose
        the space between them, not the last keys: Help and Quit stay in sight."""
        tight = self.has_class("-tight")
        natural = self.virtual_size.width + (len(self.query_children("FooterKey")) if tight else 0)
        self.set_class(natural > self.size.width > 0, "-tight")


def forget_closed_watchers(node: DOMNode) -> None:
    """Drop `node`'s watchers that belong to widgets gone from the screen (as Textual itself
    drops them when the watched value changes)."""
    watchers: dict[str, list[tuple[Any, Any]]] = getattr(node, "__watchers", {})
    for entries in watchers.values():
        entries[:] = [(owner, watch) for owner, watch in entries if not (owner._closing or owner._closed)]

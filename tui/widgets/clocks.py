"""A panel's own clocks, which rest while the panel's screen is hidden.

Panels age what they show (an iteration's elapsed time, "checked 12s ago") on clocks of their
own. Behind another screen (the fleet, a neighbour's loop) nobody sees them: every tick there was
work for nothing, the most an idle fleet of hundreds of loops cost after its own table. The
screen tells its panels when it is hidden and shown again (`rest_clocks`, `wake_clocks`); shown
again, every clock ticks at once, so nothing stale is ever on screen.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.timer import Timer
from textual.widget import Widget


class Clocks:
    """The timers one panel owns (they stop with it), and whether they rest."""

    def __init__(self) -> None:
        self.timers: list[tuple[Timer, Callable[[], object], Callable[[], bool]]] = []
        self.resting = False

    def every(
        self,
        widget: Widget,
        seconds: float,
        callback: Callable[[], object],
        *,
        wanted: Callable[[], bool] = lambda: True,
    ) -> Timer:
        """A clock of `widget`'s, calling `callback` every `seconds` while its screen is shown and
        `wanted()` says it is needed (the panel pauses and resumes it too, through `resume`)."""
        if not widget.screen.is_current:
            self.resting = True  # mounted behind another screen (the fleet opens over the panels)
        timer = widget.set_interval(seconds, callback, pause=self.resting or not wanted())
        self.timers.append((timer, callback, wanted))
        return timer

    def resume(self, timer: Timer) -> None:
        """The panel wants `timer` going again: it does once its screen is shown."""
        if not self.resting:
            timer.resume()

    def rest(self) -> None:
        self.resting = True
        for timer, _callback, _wanted in self.timers:
            timer.pause()

    def wake(self) -> None:
        if not self.resting:
            return
        self.resting = False
        called: list[Callable[[], object]] = []
        for timer, callback, wanted in self.timers:
            if wanted():
                timer.resume()
                if callback not in called:  # what aged while hidden shows now, not a tick later
                    called.append(callback)
                    callback()


def rest_clocks(root: Widget) -> None:
    """Every panel below `root` (a screen being hidden) rests its clocks."""
    for widget in root.walk_children(Widget):
        clocks = getattr(widget, "clocks", None)
        if isinstance(clocks, Clocks):
            clocks.rest()


def wake_clocks(root: Widget) -> None:
    for widget in root.walk_children(Widget):
        clocks = getattr(widget, "clocks", None)
        if isinstance(clocks, Clocks):
            clocks.wake()

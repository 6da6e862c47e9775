"""A panel's own clocks, which rest while the panel's screen is hidden.

Panels age what they show (an iteration's elapsed time, "checked 12s ago") on clocks of their
own. Behind another screen (the fleet, a neighbour's loop) nobody sees them: every tick there was
work for nothing, the most an idle fleet of hundreds of loops cost after its own table. The
screen tells its panels when it is hidden and shown again (`rest_clocks`, `wake_clocks`); shown
again, every clock ticks at once, so nothing stale is ever on screen.

Most panels age once a second. They share one clock of the app's (`Second`): each clock is a
wake-up of the whole app (a timer task, its message, the event loop's turn), and five panels
each on its own second were five of those a second, most of what an idle monitor cost beside
Textual's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from textual.app import App
from textual.message_pump import MessagePump
from textual.timer import Timer
from textual.widget import Widget

SECOND = 1.0


class Second:
    """The app's clock for every panel's once-a-second work: one wake-up calls them all. It
    rests while no panel that wants it is shown."""

    def __init__(self, app: App[Any]) -> None:
        self.ticking: list[tuple[Widget, Callable[[], object], Clocks]] = []
        self.timer = app.set_interval(SECOND, self.tick, pause=True)

    def join(self, widget: Widget, callback: Callable[[], object], clocks: Clocks) -> None:
        self.ticking.append((widget, callback, clocks))
        if not clocks.resting:
            self.timer.resume()

    def tick(self) -> None:
        wanted = False
        for entry in list(self.ticking):
            widget, callback, clocks = entry
            if not widget.is_attached:  # the panel is gone: its clock with it
                self.ticking.remove(entry)
            elif not clocks.resting and not _closing(widget):
                wanted = True
                callback()
        if not wanted:
            self.timer.pause()


def _closing(widget: Widget) -> bool:
    """Whether `widget`, or a node above it (its screen, the app), is being taken down: its
    parts may be gone already. A clock of the panel's own stopped with it; the shared one is
    the app's, and must not tick into a screen being torn down."""
    node: MessagePump | None = widget
    while node is not None:
        if node._closing or node._closed or getattr(node, "_pruning", False):
            return True
        node = node._parent
    return False


_SECONDS: WeakKeyDictionary[App[Any], Second] = WeakKeyDictionary()


def second_of(app: App[Any]) -> Second:
    second = _SECONDS.get(app)
    if second is None:
        second = _SECONDS[app] = Second(app)
    return second


class Clocks:
    """The timers one panel owns (they stop with it), and whether they rest."""

    def __init__(self) -> None:
        self.timers: list[tuple[Timer, Callable[[], object], Callable[[], bool]]] = []
        self.each_second: list[Callable[[], object]] = []
        self.second: Second | None = None
        self.resting = False

    def every_second(self, widget: Widget, callback: Callable[[], object]) -> None:
        """`callback` called once a second, on the app's shared clock, while `widget`'s screen
        is shown."""
        if not widget.screen.is_current:
            self.resting = True
        self.second = second_of(widget.app)
        self.second.join(widget, callback, self)
        self.each_second.append(callback)

    def going(self) -> list[bool]:
        """Whether each clock is going (own clocks first, then the shared second's): for tests."""
        own: list[bool] = [timer._active.is_set() for timer, _callback, _wanted in self.timers]
        shared = self.second is not None and not self.resting and self.second.timer._active.is_set()
        return own + [shared] * len(self.each_second)

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
        if self.second is not None:
            self.second.timer.resume()
        for callback in self.each_second:
            if callback not in called:
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

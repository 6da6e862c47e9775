"""How often the summary panels are redrawn while a loop races.

A runner at five iterations a second changes the iteration number, the task counts, the timings
and the current task five times a second. Nobody reads a count that fast, and each redraw of the
panels at the top of the screen makes Textual compose a frame of the whole screen (its
compositor draws the rectangle around everything that changed: the status bar at the top and
the journal at the bottom are the whole screen). So the summary panels (status bar, sources,
iteration, verification, workers) see the snapshot:

* at once, while they change fewer than `BURST` times in `BURST_S` seconds (a loop at a
  person's pace or at one iteration a second, a key pressed, a file edited: nothing waits);
* at once whenever what a person steers by changes (the loop's status, a command pending, an
  escalation or question, the state unreadable, a confirmation asked for);
* otherwise at most every `EVERY_S`: the newest snapshot goes with the first snapshot that
  comes once `EVERY_S` has passed (the panels change in the frame the journal and the output
  change in, not in a frame of their own), or, when none comes, a moment later on a timer.

The journal and the output panel follow every snapshot as it comes: they are what a person
watches move, and change → screen is measured on them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from loop.core.model import replace
from loop.views.snapshot import Snapshot

EVERY_S = 1.0
"""While the summaries change fast, at most one redraw of them per this many seconds. Each is
about a quarter of what a frame of the journal and the output costs besides: at five iterations
a second, two of them a second were a tenth of the monitor's time."""
LATE_S = 2 * EVERY_S
"""A snapshot held back is shown this long after the last one at the latest, when no other
snapshot comes to take it along (the loop went quiet)."""
BURST = 3
"""Summary changes in a row shown at once; more within `BURST_S` seconds are paced."""
BURST_S = 1.5
"""A loop at one iteration a second changes the summaries `BURST` times in two seconds: shown
each time, as every slower one is."""


def summary_key(snapshot: Snapshot) -> tuple[Any, ...]:
    """Everything the summary panels show of a snapshot: equal keys draw nothing new. The task
    sources without the time they were read (their "checked 2s ago" ages on its own clock); the
    journal only as far as they show it (the escalation, the question, the verifications; all of
    it when there is no loop, when the verification panel lists past runs)."""
    sources = None
    if snapshot.sources is not None:
        reports = tuple(replace(r, checked_at="") for r in snapshot.sources.sources)
        sources = (snapshot.sources.pending_total, snapshot.sources.uncertain, reports)
    return (
        snapshot.workspace,
        snapshot.loop,
        snapshot.error,
        sources,
        snapshot.verifications,
        snapshot.durations,
        snapshot.archive,
        snapshot.backup_exists,
        snapshot.parallel,
        snapshot.pending,
        snapshot.unconfirmed,
        snapshot.escalation,
        snapshot.question,
        snapshot.events if snapshot.loop is None else None,
    )


def steering_key(snapshot: Snapshot | None) -> tuple[Any, ...]:
    """What a person steers by: a change here is shown at once, however fast the loop goes."""
    if snapshot is None:
        return (None,)
    loop = snapshot.loop
    return (
        snapshot.workspace,
        None if loop is None else (loop.status, loop.escalated, loop.waiting_for, loop.alive, loop.driver),
        snapshot.error,
        snapshot.pending,
        snapshot.unconfirmed,
        snapshot.escalation,
        snapshot.question,
        snapshot.archive is None,
    )


class SummaryPace:
    """Decides when a snapshot reaches the summary panels (`show` is called with each one)."""

    def __init__(
        self,
        show: Callable[[Snapshot | None], None],
        later: Callable[[float, Callable[[], None]], object],
        clock: Callable[[], float],
    ) -> None:
        self.show_now = show
        """Hands a snapshot to the summary panels."""
        self.later = later
        """Runs a callback after a delay (the app's timer)."""
        self.clock = clock
        self.key: tuple[Any, ...] | None = None
        self.steering: tuple[Any, ...] | None = None
        self.shown_at: deque[float] = deque(maxlen=BURST)
        self.changed_at: deque[float] = deque(maxlen=BURST)
        """When the summaries last changed (offered anew), shown or not: how fast they change."""
        self.waiting: Snapshot | None = None
        """The newest snapshot held back, shown with the next one once due, or by the timer."""
        self.timer_set = False

    def offer(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            self.waiting = None
            self._show(None, None)
            return
        key = summary_key(snapshot)
        if key == self.key:
            self.waiting = None  # what is held back, if anything, is no newer than what is shown
            return
        now = self.clock()
        self.changed_at.append(now)
        burst = len(self.changed_at) == BURST and now - self.changed_at[0] < BURST_S
        due = now - self.shown_at[-1] >= EVERY_S if self.shown_at else True
        if not burst or due or steering_key(snapshot) != self.steering:
            self.waiting = None
            self._show(snapshot, key)
            return
        self.waiting = snapshot
        if not self.timer_set:
            self.timer_set = True
            self.later(max(0.0, self.shown_at[-1] + LATE_S - now), self._due)

    def _due(self) -> None:
        self.timer_set = False
        if self.waiting is None:
            return
        wait = self.shown_at[-1] + LATE_S - self.clock()
        if wait > 0:  # shown since with a snapshot that came: this one waits for the next
            self.timer_set = True
            self.later(wait, self._due)
            return
        waiting, self.waiting = self.waiting, None
        self._show(waiting, summary_key(waiting))

    def _show(self, snapshot: Snapshot | None, key: tuple[Any, ...] | None) -> None:
        self.key = key
        self.steering = steering_key(snapshot)
        self.shown_at.append(self.clock())
        self.show_now(snapshot)

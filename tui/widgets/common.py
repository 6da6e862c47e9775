"""Small pieces the panels share."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from textual.cache import LRUCache
from textual.widget import Widget
from textual.widgets import RichLog

from loop.timeutil import human_duration, parse_iso, utcnow


def ago(ts: str | None, now: datetime) -> str:
    moment = parse_iso(ts or "")
    if moment is None:
        return "?"
    seconds = max(0, int((now - moment).total_seconds()))
    return f"{duration(seconds)} ago"


def roughly_ago(ts: str | None, now: datetime) -> str:
    """`just now`, `15s ago`, `3m ago`, `2h 05m ago`: an age that changes every 15 s at most.

    For a freshness mark on a panel's border: the panel is drawn again whenever its border text
    changes, and a table drawn every second is most of what an idle monitor costs."""
    moment = parse_iso(ts or "")
    if moment is None:
        return "?"
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 15:
        return "just now"
    return f"{roughly(seconds // 15 * 15 if seconds < 60 else seconds)} ago"


def roughly(seconds: float) -> str:
    """`42s`, `11m`, `7h 05m`: a long time to the minute, so a clock showing it is redrawn once
    a minute rather than every second (an idle monitor's main cost)."""
    total = max(0, int(seconds))
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m"
    return f"{total // 3600}h {total % 3600 // 60:02d}m"


def duration(seconds: float | None) -> str:
    return "?" if seconds is None else human_duration(seconds)


def relative(path: str, root: str) -> str:
    """`path` inside the workspace `root`, shown relative to it (shorter, and the same in every
    checkout, which keeps screenshots stable)."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def clock_of(widget: Widget) -> datetime:
    """The app's "now" for a panel's own clock: tests and screenshots fix it on the app."""
    return getattr(widget.app, "clock", utcnow)()


def word_lengths(text: str) -> list[list[int]]:
    """The shape of a text as wrapping sees it: two texts with the same shape wrap to the same
    height at any width, so replacing one by the other needs no new layout."""
    return [[len(word) for word in line.split(" ")] for line in text.split("\n")]


class TailLog(RichLog):
    """A `RichLog` for a log that is tailed: its cache of drawn lines holds a few screens.

    While a log follows its tail every frame scrolls, so every line drawn is drawn under a new
    cache key: `RichLog`'s 1,024-line cache filled with lines never shown again, megabytes a
    monitor carried for nothing. A few screens' worth keeps scrolling back cheap."""

    LINE_CACHE = 256

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._line_cache = LRUCache(self.LINE_CACHE)


_BORDERS: WeakKeyDictionary[Widget, tuple[str | None, str | None]] = WeakKeyDictionary()


def set_border(widget: Widget, *, title: str | None = None, subtitle: str | None = None) -> None:
    """Set a panel's border texts, only when they change (None: leave as is).

    Textual redraws the whole widget each time a border text is set, even to the same text; a
    panel that refreshes its "checked 2s ago" with every read would redraw its table five times
    a second for nothing."""
    old_title, old_subtitle = _BORDERS.get(widget, (None, None))
    if title is not None and title != old_title:
        widget.border_title = title
        old_title = title
    if subtitle is not None and subtitle != old_subtitle:
        widget.border_subtitle = subtitle
        old_subtitle = subtitle
    _BORDERS[widget] = (old_title, old_subtitle)

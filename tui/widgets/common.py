"""Small pieces the panels share."""

from __future__ import annotations

from datetime import datetime
from weakref import WeakKeyDictionary

from rich.cells import cell_len
from textual.geometry import Region
from textual.visual import VisualType
from textual.widget import Widget
from textual.widgets import Static

from loop.core.timeutil import human_duration, parse_iso, utcnow


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


def minutes_ago(ts: str | None, now: datetime) -> str:
    """`just now`, `3m ago`, `2h 05m ago`: the minutes the clock turned between `ts` and `now`.

    For a column of ages (the fleet's): every age in it changes at the same moment, when the
    clock's minute turns, so the table is redrawn once a minute, not whenever one of hundreds of
    rows crosses its own minute (a cell that changes redraws the table's whole visible part)."""
    moment = parse_iso(ts or "")
    if moment is None:
        return "?"
    minutes = max(0, int(now.timestamp() // 60) - int(moment.timestamp() // 60))
    return "just now" if minutes == 0 else f"{roughly(minutes * 60)} ago"


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


def wrap_words(text: str, first: int, rest: int) -> list[str]:
    """`text` in lines of at most `first` cells, then `rest`, broken between words (a word longer
    than a line is broken where the line ends)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        room = first if not lines else rest
        candidate = f"{line} {word}" if line else word
        if cell_len(candidate) <= room:
            line = candidate
            continue
        if line:
            lines.append(line)
            line = ""
            room = rest
        while cell_len(word) > room:
            cut = _fit(word, room)
            lines.append(word[:cut])
            word = word[cut:]
            room = rest
        line = word
    if line or not lines:
        lines.append(line)
    return lines


def _fit(word: str, room: int) -> int:
    """How many characters of `word` fill at most `room` cells (at least one): up to its last
    `/` that fits, when there is one past the first third (a path or a branch broken between
    its parts, never a lone `)` on a line of its own)."""
    used, cut = 0, len(word)
    for index, char in enumerate(word):
        used += cell_len(char)
        if used > room:
            cut = max(1, index)
            break
    if cut < len(word):
        slash = word.rfind("/", 0, cut)
        if slash + 1 > cut // 3:
            return slash + 1
    return cut


def hanging(text: str, width: int, indent: int = 2) -> list[str]:
    """`text` wrapped at `width`, its next lines indented by `indent`: a fact of a panel whose
    continuation reads as part of it."""
    words = wrap_words(text, max(1, width), max(1, width - indent))
    return [words[0], *(" " * indent + line for line in words[1:])]


def clock_of(widget: Widget) -> datetime:
    """The app's "now" for a panel's own clock: tests and screenshots fix it on the app."""
    return getattr(widget.app, "clock", utcnow)()


_HEIGHTS: WeakKeyDictionary[Static, tuple[int, int]] = WeakKeyDictionary()


def update_static(widget: Static, content: VisualType) -> None:
    """`Static.update`, laying the screen out again only when the new content's height differs.

    A layout of the whole screen costs more than drawing the panel, and most updates keep the
    height: a count, a name, a task of the same number of lines."""
    widget.update(content, layout=False)
    width = widget.content_size.width
    height = widget.get_content_height(widget.size, widget.size, width) if width > 0 else -1
    if height < 0 or _HEIGHTS.get(widget, (width, widget.content_size.height)) != (width, height):
        widget.refresh(layout=True)
    _HEIGHTS[widget] = (width, height)


_BORDERS: WeakKeyDictionary[Widget, tuple[str | None, str | None]] = WeakKeyDictionary()


def set_border(widget: Widget, *, title: str | None = None, subtitle: str | None = None) -> None:
    """Set a panel's border texts, only when they change (None: leave as is), repainting only
    the border row that shows them.

    Textual redraws the whole widget each time a border text is set, even to the same text; a
    panel that refreshes its "checked 2s ago" with every read would redraw its table five times
    a second for nothing. And a panel around a log (the output, the journal) whose subtitle
    changes would have every row of its border sides drawn again, where one row changed."""
    old_title, old_subtitle = _BORDERS.get(widget, (None, None))
    if title is not None and title != old_title:
        _border_text(widget, "title", title)
        old_title = title
    if subtitle is not None and subtitle != old_subtitle:
        _border_text(widget, "subtitle", subtitle)
        old_subtitle = subtitle
    _BORDERS[widget] = (old_title, old_subtitle)


def _border_text(widget: Widget, which: str, text: str) -> None:
    """`widget.border_title = text` (or `border_subtitle`), repainting the top (bottom) row only.

    Textual's setter refreshes the whole widget; this stores the text as that setter does
    (Textual 8.2) and marks the one row dirty. A widget not laid out yet, or an empty text, is
    left to the setter."""
    outer = widget.outer_size
    offset = widget.content_offset
    if not text or outer.height < 2 or not outer.width:
        setattr(widget, f"border_{which}", text)
        return
    content = widget.render_str(text).expand_tabs(4).split()[0]
    row = -offset.y if which == "title" else outer.height - 1 - offset.y  # in content coordinates
    if which == "title":
        widget._border_title = content
    else:
        widget._border_subtitle = content
    widget.refresh(Region(-offset.x, row, outer.width, 1))

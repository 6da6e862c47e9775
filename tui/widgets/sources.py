"""Task sources: a row per source, its counts, its availability, what is pending."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.reactive import var
from textual.strip import Strip
from textual.widget import Widget

from loop.core.model import SOURCE_LABELS
from loop.views.snapshot import Snapshot
from tui.widgets.clocks import Clocks
from tui.widgets.common import clock_of, relative, roughly_ago, set_border, wrap_words

START_AGAIN = (
    ("in Claude Code:", "/orchestrator-loop what to do"),
    ("in a terminal: ", 'loopdeck run "what to do"'),
)
"""The two ways to start a loop, as the README gives them."""


def next_steps(snapshot: Snapshot) -> str:
    """With no live loop, what a person can do next: the ways to start one (with a state file
    that does not read, nothing: the error panel says how to mend it)."""
    if snapshot.error is not None:
        return "Not counted while the loop's state file does not read."
    ended = "No loop running; the last one is archived." if snapshot.archive else "No loop here yet."
    return "\n".join(
        [
            ended,
            "Start one:",
            *(f"  {where} {how}" for where, how in START_AGAIN),
            "This monitor follows the new loop by itself.",
        ]
    )


Cell = tuple[str, str]
"""A table cell: its text and its style ("" plain, or one of the panel's `sources--*` names)."""


@dataclass(frozen=True)
class Row:
    """A line of the table: a source with its counts and where it reads from (or why it is
    off), or one of its pending items (no counts)."""

    counts: tuple[Cell, ...]
    """The source's name and its three counts; () for an item."""
    detail: Cell
    """Where it reads from, why it is off, or the item's `[~] title`."""
    hang: int = 0
    """An item's mark (`[~] `): its title wraps under itself past it."""
    spans: bool = False
    """The counts say nothing (an off source): a detail that does not fit after them starts
    right after the name."""


@dataclass(frozen=True)
class SourcesView:
    """What the panel shows: equal views draw nothing."""

    rows: tuple[Row, ...] | None
    """The table's rows, the header first; None when there is no loop (then `text` says what
    to do)."""
    text: str = ""


HEADER = Row(tuple((h, "bold") for h in ("source", "pending", "doing", "done")), ("", ""))


def sources_view(snapshot: Snapshot, items: int) -> SourcesView:
    """The table for a snapshot, with at most `items` pending items under each source. Nothing
    is cut here: the panel wraps what its width cannot hold."""
    aggregate = snapshot.sources
    if aggregate is None:
        return SourcesView(None, next_steps(snapshot))
    rows: list[Row] = [HEADER]
    for report in aggregate.sources:
        label = SOURCE_LABELS.get(report.name, report.name)
        if not report.enabled:
            none = (("-", ""),) * 3
            rows.append(Row(((label, "off"), *none), (f"off: {report.error}", "off"), spans=True))
            continue
        if not report.available:
            unknown = (("?", ""),) * 3
            problem = (f"UNAVAILABLE: {report.error}", "error")
            rows.append(Row(((label, "error"), *unknown), problem, spans=True))
            continue
        style = "pending" if report.open_count else ""
        counts = (
            (label, style),
            (str(report.pending), style),
            (str(report.in_progress), ""),
            (str(report.done), ""),
        )
        rows.append(Row(counts, (relative(report.detail or "", snapshot.workspace), "off")))
        for item in report.pending_items()[:items]:
            mark = "~" if item.status == "in_progress" else " "
            head = f"[{mark}] "  # a line number here read like a task's id
            rows.append(Row((), (head + " ".join(item.title.split()), "item"), hang=cell_len(head)))
    return SourcesView(tuple(rows))


def sources_subtitle(snapshot: Snapshot | None, now: datetime) -> str:
    aggregate = snapshot.sources if snapshot is not None else None
    if aggregate is None:
        return ""
    return (
        f"{aggregate.pending_total} open"
        + (" · UNCERTAIN" if aggregate.uncertain else "")
        + f" · checked {roughly_ago(aggregate.checked_at, now)}"
    )


class SourcesPanel(Widget):
    """The table, laid out by hand at the panel's width: `render` draws it, and
    `get_content_height` tells the layout how many lines it takes at a width, so one layout
    places it right, even on a screen laid out under a prompt."""

    DEFAULT_CSS = """
    SourcesPanel { border: round $primary 50%; border-title-color: $text; padding: 0 1; height: auto; }
    """
    COMPONENT_CLASSES = {"sources--off", "sources--error", "sources--pending", "sources--item"}
    DEFAULT_CSS += """
    SourcesPanel > .sources--off { color: $text-muted; }
    SourcesPanel > .sources--error { color: $error; text-style: bold; }
    SourcesPanel > .sources--pending { color: $warning; text-style: bold; }
    SourcesPanel > .sources--item { color: $text-muted; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the screen's)."""
    view: var[SourcesView | None] = var(None, init=False)
    """The table on screen: redrawn only when it changes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drawn: tuple[SourcesView | None, int, Text] | None = None
        """The last table drawn: its view, its width, its text (a draw at the same width of
        the same view is this text again)."""
        self.lines: tuple[Text, Style, list[Strip]] | None = None
        """That text as the rows on screen, and the panel's style they were drawn in."""

    def on_mount(self) -> None:
        self.border_title = "Task sources"
        self.clocks = Clocks()
        self.clocks.every_second(self, self._tick)

    def _tick(self) -> None:
        """Ages "checked 12s ago": the subtitle alone, the table stays as drawn."""
        set_border(self, subtitle=sources_subtitle(self.snapshot, clock_of(self)))

    def on_resize(self) -> None:
        self.watch_snapshot(self.snapshot)  # how many items fit depends on the terminal's height

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            return
        # On a short terminal, or with workers (their table lists the tasks under way), one
        # pending item per source: the panels below keep their lines.
        few = self.app.size.height < 30 or snapshot.parallel is not None
        self.view = sources_view(snapshot, 1 if few else 3)
        self._tick()

    def watch_view(self, view: SourcesView | None) -> None:
        """Drawn again; laid out again only when the table's height changes at this width."""
        width = self.content_size.width
        before = self.drawn[2].plain.count("\n") if self.drawn is not None else -1
        after = self.text_at(width).plain.count("\n") if width > 0 else -2
        self.refresh(layout=before != after)

    def text_at(self, width: int) -> Text:
        view = self.view
        if self.drawn is not None and self.drawn[0] is view and self.drawn[1] == width:
            return self.drawn[2]
        if view is None:
            text = Text("")
        elif view.rows is None:
            look = self.get_component_rich_style("sources--off")
            lines = [
                line for part in view.text.splitlines() for line in _wrapped(Text(), part, look, width, 2)
            ]
            text = Text("\n", no_wrap=True).join(lines)
        else:
            names = ("off", "error", "pending", "item")
            styles = {name: self.get_component_rich_style(f"sources--{name}") for name in names}
            styles["bold"] = Style(bold=True)
            text = table_text(view.rows, width, styles)
        self.drawn = (view, width, text)
        return text

    def render(self) -> Text:
        return self.text_at(self.content_size.width)

    def render_line(self, y: int) -> Strip:
        """A row of the table, drawn straight from its text: Textual's own way (the text made
        its content, wrapped, styled, cut into rows) took 2 to 4 ms, and the table is drawn
        again whenever a count changes, every iteration of a running loop. Text selected with
        the mouse is Textual's to draw."""
        if self.text_selection is not None:
            return super().render_line(y)
        rows = self._rows()
        return rows[y] if y < len(rows) else Strip.blank(self.size.width, self.visual_style.rich_style)

    def _rows(self) -> list[Strip]:
        width = self.size.width
        text = self.text_at(width)
        base = self.visual_style.rich_style
        if self.lines is not None and self.lines[0] is text and self.lines[1] == base:
            return self.lines[2]
        console = self.app.console
        rows = []
        for y, line in enumerate(text.split("\n", allow_blank=True)):
            if cell_len(line.plain) > width:
                line.truncate(width, overflow="ellipsis")
            segments, x = [], 0
            for segment in Segment.apply_style(line.render(console), base):
                # Where each piece is, as Textual marks it: a mouse selection starts from it.
                offset = Style.from_meta({"offset": (x, y)})
                segments.append(Segment(segment.text, (segment.style or base) + offset))
                x += segment.cell_length
            rows.append(Strip(segments, x))
        self.lines = (text, base, rows)
        return rows

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.text_at(width).plain.splitlines()) if self.view is not None else 0


NAME_WIDTH = 14
"""The name column's least width: "GitHub project" whole."""
INDENT = 2
"""Where a detail or an item that does not fit beside the counts starts, on its own line."""
BESIDE_MIN = 16
"""Columns a detail needs beside the counts (or the name) before it goes on lines of its own."""


def table_text(rows: tuple[Row, ...], width: int, styles: dict[str, Style]) -> Text:
    """The table laid out by hand: the source's name, three counts right-aligned, then where
    it reads from (or why it is off, or an item), wrapped, never cut: beside the counts when it
    fits, else right after the name for an off source (its counts say nothing), else wrapped
    under them, or on lines of its own below.

    The panel is redrawn whenever a count changes, every iteration of a running loop; a Rich
    table measured and drew the same five columns in milliseconds, most of what a new snapshot
    cost the monitor."""
    counted = [row.counts for row in rows if row.counts]
    widths = [max(cell_len(counts[column][0]) for counts in counted) for column in range(4)]
    widths[0] = max(widths[0], NAME_WIDTH)
    beside = sum(widths) + 4  # the detail's column, after the counts and a space each
    lines: list[Text] = []
    for row in rows:
        text, style = row.detail
        look = styles.get(style, "")
        if not row.counts:  # an item: beside the counts, or on lines of its own
            start = beside if beside + cell_len(text) <= width else INDENT
            lines += _wrapped(Text(" " * start), text, look, width, start + row.hang)
            continue
        line = Text(no_wrap=True, end="")
        for column, (cell, cell_style) in enumerate(row.counts):
            gap = " " * (widths[column] - cell_len(cell))
            line.append_text(
                Text(cell + gap if column == 0 else gap + cell, style=styles.get(cell_style, ""))
            )
            line.append(" ")
        if not text:
            line.rstrip()
            lines.append(line)
            continue
        if row.spans:  # an off source's counts say nothing: its reason takes their place
            line = line[: widths[0] + 1]
        if cell_len(line.plain) + cell_len(text) <= width or width - cell_len(line.plain) >= BESIDE_MIN:
            lines += _wrapped(line, text, look, width, cell_len(line.plain))
        else:
            line.rstrip()
            lines.append(line)
            lines += _wrapped(Text(" " * INDENT), text, look, width, INDENT)
    return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)


def _wrapped(first: Text, text: str, style: Style | str, width: int, indent: int) -> list[Text]:
    """`first` followed by `text` wrapped at `width`, its next lines starting at `indent`."""
    room = max(1, width - cell_len(first.plain))
    words = wrap_words(text, room, max(1, width - indent))
    lines = [first + Text(words[0] if words else "", style=style)]
    lines += [Text(" " * indent) + Text(part, style=style) for part in words[1:]]
    for line in lines:
        line.rstrip()
    return lines

"""Task sources: a row per source, its counts, its availability, what is pending."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.reactive import var
from textual.widgets import Static

from loop.core.model import SOURCE_LABELS
from loop.views.snapshot import Snapshot
from tui.widgets.common import clip, clock_of, relative, roughly_ago, set_border, update_static


def next_steps(snapshot: Snapshot) -> str:
    """With no live loop, what a person can do next: the ways to start one."""
    ended = "No loop running; the last one is archived." if snapshot.archive else "No loop here yet."
    return "\n".join(
        [
            ended,
            'start one:   loopdeck run "what to do"',
            "in Claude:   loopdeck start",
            "This monitor follows the new loop by itself.",
        ]
    )


Cell = tuple[str, str]
"""A table cell: its text and its style ("" plain, or one of the panel's `sources--*` names)."""


@dataclass(frozen=True)
class SourcesView:
    """What the panel shows: equal views draw nothing."""

    rows: tuple[tuple[Cell, ...], ...] | None
    """The table's rows; None when there is no loop (then `text` says what to do)."""
    text: str = ""


def sources_view(snapshot: Snapshot, items: int) -> SourcesView:
    """The table for a snapshot, with at most `items` pending items under each source."""
    aggregate = snapshot.sources
    if aggregate is None:
        return SourcesView(None, next_steps(snapshot))
    rows: list[tuple[Cell, ...]] = [tuple((h, "bold") for h in ("source", "pending", "doing", "done", ""))]
    for report in aggregate.sources:
        label = SOURCE_LABELS.get(report.name, report.name)
        if not report.enabled:
            why = clip(f"off: {report.error}", 60)
            rows.append(((label, "off"), ("-", ""), ("-", ""), ("-", ""), (why, "off")))
            continue
        if not report.available:
            problem = clip(f"UNAVAILABLE: {report.error}", 60)
            rows.append(((label, "error"), ("?", ""), ("?", ""), ("?", ""), (problem, "error")))
            continue
        style = "pending" if report.open_count else ""
        rows.append(
            (
                (label, style),
                (str(report.pending), style),
                (str(report.in_progress), ""),
                (str(report.done), ""),
                (clip(relative(report.detail or "", snapshot.workspace), 60), "off"),
            )
        )
        for item in report.pending_items()[:items]:
            mark = "~" if item.status == "in_progress" else " "
            at = f"{item.line}: " if item.line else ""
            rows.append((("", ""),) * 4 + ((f"[{mark}] {at}{clip(item.title, 50)}", "item"),))
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


class SourcesPanel(Static):
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
    """The workspace as last read (bound to the app's)."""
    view: var[SourcesView | None] = var(None, init=False)
    """The table on screen: redrawn only when it changes."""
    drawn_width = 0
    """The width the table was last drawn at: a new width draws it again."""

    def on_mount(self) -> None:
        self.border_title = "Task sources"
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        """Ages "checked 12s ago": the subtitle alone, the table stays as drawn."""
        set_border(self, subtitle=sources_subtitle(self.snapshot, clock_of(self)))
        self.draw_at_width()

    def on_resize(self) -> None:
        self.watch_snapshot(self.snapshot)  # how many items fit depends on the terminal's height
        self.draw_at_width()

    def draw_at_width(self) -> None:
        """The table again if it was drawn at another width (or before the panel had one)."""
        if (
            self.view is not None
            and self.view.rows is not None
            and self.content_size.width != self.drawn_width
        ):
            self.draw(self.view)

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            return
        # On a short terminal one pending item per source: the panels below keep their lines.
        self.view = sources_view(snapshot, 3 if self.app.size.height >= 30 else 1)
        self._tick()

    def watch_view(self, view: SourcesView | None) -> None:
        if view is not None:
            self.draw(view)

    def draw(self, view: SourcesView) -> None:
        if view.rows is None:
            update_static(self, Text(view.text, style=self.get_component_rich_style("sources--off")))
            return
        width = self.content_size.width
        if width <= 0:  # not laid out yet: drawn at its width on resize
            return
        names = ("off", "error", "pending", "item")
        styles = {name: self.get_component_rich_style(f"sources--{name}") for name in names}
        styles["bold"] = Style(bold=True)
        self.drawn_width = width
        update_static(self, table_text(view.rows, width, styles))


def table_text(rows: tuple[tuple[Cell, ...], ...], width: int, styles: dict[str, Style]) -> Text:
    """The table laid out by hand, a line per row: the source's name, three counts right-aligned,
    then where it reads from (or an item), cut at the panel's width.

    The panel is redrawn whenever a count changes, every iteration of a running loop; a Rich
    table measured and drew the same five columns in milliseconds, most of what a new snapshot
    cost the monitor."""
    widths = [max(cell_len(row[column][0]) for row in rows) for column in range(4)]
    widths[0] = max(widths[0], 14)  # "GitHub project" whole
    lines = []
    for row in rows:
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        for column, (text, style) in enumerate(row[:4]):
            gap = " " * (widths[column] - cell_len(text))
            line.append_text(Text(text + gap if column == 0 else gap + text, style=styles.get(style, "")))
            line.append(" ")
        text, style = row[4]
        line.append(text, styles.get(style, ""))
        line.rstrip()
        line.truncate(width, overflow="ellipsis")
        lines.append(line)
    return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)

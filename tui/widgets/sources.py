"""Task sources: a row per source, its counts, its availability, what is pending."""

from __future__ import annotations

from datetime import datetime

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from loop.prompts import SOURCE_LABELS
from loop.snapshot import Snapshot
from tui.widgets.common import ago, clip, relative


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

    def on_mount(self) -> None:
        self.border_title = "Task sources"

    def show(self, snapshot: Snapshot, now: datetime) -> None:
        aggregate = snapshot.sources
        if aggregate is None:
            self.border_subtitle = ""
            self.update(Text(next_steps(snapshot), style=self.get_component_rich_style("sources--off")))
            return
        off = self.get_component_rich_style("sources--off")
        bad = self.get_component_rich_style("sources--error")
        hot = self.get_component_rich_style("sources--pending")
        item_style = self.get_component_rich_style("sources--item")
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column("source", min_width=14, no_wrap=True)  # "GitHub project" whole
        table.add_column("pending", justify="right")
        table.add_column("doing", justify="right")
        table.add_column("done", justify="right")
        table.add_column("where", ratio=3, no_wrap=True)
        table.add_row(*(Text(h, style="bold") for h in ("source", "pending", "doing", "done", "")))
        for report in aggregate.sources:
            label = SOURCE_LABELS.get(report.name, report.name)
            if not report.enabled:
                table.add_row(
                    Text(label, style=off), "-", "-", "-", Text(clip(f"off: {report.error}", 60), style=off)
                )
                continue
            if not report.available:
                table.add_row(
                    Text(label, style=bad),
                    "?",
                    "?",
                    "?",
                    Text(clip(f"UNAVAILABLE: {report.error}", 60), style=bad),
                )
                continue
            style = hot if report.open_count else None
            table.add_row(
                Text(label, style=style or ""),
                Text(str(report.pending), style=style or ""),
                str(report.in_progress),
                str(report.done),
                Text(clip(relative(report.detail or "", snapshot.workspace), 60), style=off),
            )
            # On a short terminal one pending item per source: the panels below keep their lines.
            for item in report.pending_items()[: 3 if self.app.size.height >= 30 else 1]:
                mark = "~" if item.status == "in_progress" else " "
                at = f"{item.line}: " if item.line else ""
                table.add_row("", "", "", "", Text(f"[{mark}] {at}{clip(item.title, 50)}", style=item_style))
        self.border_subtitle = (
            f"{aggregate.pending_total} open"
            + (" · UNCERTAIN" if aggregate.uncertain else "")
            + f" · checked {ago(aggregate.checked_at, now)}"
        )
        self.update(table)

"""The iterations' durations as bars: Textual's sparkline, drawn row by row at the cost of its
cells.

Textual's `Sparkline` yields every cell as a Rich segment of its own, measured, styled and cut
into lines by Rich's console, with its buckets counted in `Fraction`s: about 1.2 ms for a chart
of two rows (0.2 ms here), drawn again with every iteration of a running loop. This one draws
the same cells in the same styles straight into the rows Textual puts on screen, and draws them
only when the durations, its size or its colours change.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.renderables._blend_colors import blend_colors
from textual.strip import Strip
from textual.widgets import Sparkline

BARS = "▁▂▃▄▅▆▇█"


class DurationsChart(Sparkline):
    """A `Sparkline` (the same look, the same CSS) whose rows are worked out here."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._drawn: tuple[object, list[Strip]] | None = None

    def render_line(self, y: int) -> Strip:
        rows = self._rows()
        return rows[y] if y < len(rows) else Strip.blank(self.size.width, self.visual_style.rich_style)

    def _rows(self) -> list[Strip]:
        width, height = self.size
        base = self.visual_style.rich_style
        _, background = self.background_colors
        low = (background + self.get_component_styles("sparkline--min-color").color).rich_color
        high = (background + self.get_component_styles("sparkline--max-color").color).rich_color
        data = tuple(self.data or ())
        key = (data, width, height, low, high, base)
        if self._drawn is not None and self._drawn[0] == key:
            return self._drawn[1]
        rows = [
            Strip([Segment(text, base + style) for text, style in row])
            for row in cells(data, width, height, low, high)
        ]
        self._drawn = (key, rows)
        return rows


def cells(
    data: Sequence[float], width: int, height: int, low: RichColor, high: RichColor
) -> list[list[tuple[str, Style | None]]]:
    """The chart's rows, top first, as (text, style) cells: what Textual's sparkline renderable
    yields for `data` at this size (its buckets, bars and colours, to the cell)."""
    height = max(1, height)
    if not data:
        return [[] for _ in range(height - 1)] + [[("▁" * width, Style.from_color(low))]]
    if len(data) == 1:
        return [[("█" * width, Style.from_color(high))] for _ in range(height)]
    minimum, maximum = min(data), max(data)
    extent = maximum - minimum or 1
    buckets = [data[len(data) * n // width : len(data) * (n + 1) // width] for n in range(width)]
    summaries = [max(bucket) for bucket in buckets if bucket]
    step = len(summaries) / width
    steps = 8 * height - 1
    colours: dict[float, Style] = {}
    rows: list[list[tuple[str, Style | None]]] = []
    for i in reversed(range(height)):
        row: list[tuple[str, Style | None]] = []
        floor, ceiling = i * 8, (i + 1) * 8
        index = 0.0
        for _ in range(width):
            ratio = (summaries[int(index)] - minimum) / extent
            bar = int(ratio * steps)
            index += step
            if bar < floor:
                row.append((" ", None))
                continue
            style = colours.get(ratio)
            if style is None:
                style = colours[ratio] = Style.from_color(blend_colors(low, high, ratio))
            row.append(("█" if bar >= ceiling else BARS[bar % 8], style))
        rows.append(row)
    return rows

"""A log panel's lines: a `RichLog` followed while it grows, at the cost of its new lines only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.widgets import RichLog


class TailLog(RichLog):
    """A `RichLog` for a log that is followed while it grows, drawn as few times as it can be.

    - Lines wrap at the panel's width. `RichLog` wraps at 78 columns at least, so a log narrower
      than that hid the end of every long line behind a sideways scrollbar.
    - It follows its tail unless the person has scrolled up.
    - A write lays nothing out and, following the tail, scrolls in the same frame. `RichLog`
      lays the whole screen out for every line written (its length is a layout value), then
      scrolls after the next refresh: two frames where one does.
    - A log shown at its end stays there when the panel gets shorter.
    - A layout that leaves the log as it was draws nothing. Textual redraws the scrollbars of
      every scrolling widget on every layout of the screen, whatever moved; here that was most
      of what a panel elsewhere changing cost.
    - Lines written together (`write_texts`: an iteration's journal lines, a burst of output)
      are added with one scroll and one change of size, and a line of one style that fits is
      cut into its strip without Rich's measuring, wrapping and rendering.
    - Its cache of drawn lines holds a few screens: while following, every line drawn is drawn
      under a new key, and `RichLog`'s 1,024 lines filled with lines never shown again.
    - A line scrolled up is not styled again (`render_lines`): a log one line longer draws one
      line, where Textual styled every row of the panel again at every scroll (a loop at five
      iterations a second: most of what the monitor cost)."""

    DEFAULT_CSS = """
    TailLog {
        overflow-x: hidden;
        scrollbar-gutter: stable;
        scrollbar-size-vertical: 1;
        scrollbar-background: $background;
        scrollbar-background-hover: $background;
        scrollbar-background-active: $background;
    }
    """

    LINE_CACHE = 256

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)
    """As a widget's, but a change lays nothing out: a log's place on screen does not depend on
    its length, only its scrollbar does, and that is updated here, before the frame is drawn."""

    def watch_virtual_size(self, size: Size) -> None:
        if self.container_size:
            self._scroll_update(size)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_width", 1)
        kwargs.setdefault("wrap", True)
        super().__init__(**kwargs)
        self._line_cache = LRUCache(self.LINE_CACHE)
        self._sized: tuple[Size, Size, Size, Size] | None = None
        self._rows: dict[int, Strip] = {}
        """Rows as drawn on screen, by the number of their line in the log (counted from its
        first line ever, as `RichLog` counts them: lines dropped at the top keep the numbers)."""
        self._rows_look: tuple[object, ...] | None = None
        """What the rows were drawn with (width, colours, style); another look draws them again."""
        self.rows_styled = 0
        self._frame: tuple[Style, int] | None = None
        """The log's style and width while a frame is drawn: worked out once for its rows, where
        `RichLog` works its style out (walking every ancestor's CSS) twice for each row."""
        """Rows styled in all (not taken from `_rows`): for tests."""

    def write(
        self,
        content: RenderableType | object,
        width: int | None = None,
        expand: bool = False,
        shrink: bool = True,
        scroll_end: bool | None = None,
        animate: bool = False,
    ) -> Self:
        if not self._size_known:  # kept until the log has a size, then written through here
            return super().write(content, width, expand, shrink, scroll_end, animate)
        follow = (
            self.auto_scroll if scroll_end is None else scroll_end
        ) and self.scroll_y >= self.max_scroll_y
        super().write(content, width, expand, shrink, scroll_end=False, animate=animate)
        if follow:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        return self

    def write_texts(self, texts: Sequence[Text], width: int | None = None) -> Self:
        """`write` for each of `texts` (at `width`, or each at its own as `write` measures it),
        drawing the same strips: the log grows and follows its tail once for all of them."""
        if not self._size_known or not texts:
            for text in texts:
                self.write(text, width)
            return self
        follow = self.auto_scroll and self.scroll_y >= self.max_scroll_y
        console = self.app.console
        room = self.scrollable_content_region.width
        strips: list[Strip] = []
        widest = self._widest_line_width
        for text in texts:
            lines = _fitting_lines(text, width if width is not None else room)
            if lines is not None:
                style = console.get_style(text.style, default=Style.null()) if text.style else None
                drawn = [[Segment(line, style)] for line in lines]
            else:  # wraps, tabs, several styles: as `RichLog` draws it
                made = self._make_renderable(text)
                drawn_width, drawn = _rendered(console, made, width, room, self.min_width)
                if not drawn:
                    widest = max(widest, drawn_width)
                    strips.append(Strip.blank(drawn_width))
                    continue
            widest = max(widest, max(sum(segment.cell_length for segment in line) for line in drawn))
            strips.extend(Strip.from_lines(drawn))  # unpadded, as `RichLog` leaves them
        self.lines.extend(strips)
        if self.max_lines is not None and len(self.lines) > self.max_lines:
            self._start_line += len(self.lines) - self.max_lines
            self.refresh()
            self.lines = self.lines[-self.max_lines :]
        self._widest_line_width = widest
        self.virtual_size = Size(widest, len(self.lines))
        if follow:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        return self

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        sized = (size, virtual_size, container_size, self.virtual_size)
        if sized == self._sized:
            return False
        self._sized = sized
        following = self.auto_scroll and self.scroll_y >= self.max_scroll_y
        resized = super()._size_updated(size, virtual_size, container_size, layout)
        if following:  # a log shown at its end stays at its end when it gets shorter
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        return resized

    def clear(self) -> Self:
        self._rows.clear()  # the numbers of lines start again at 0
        return super().clear()

    def _look(self, style: Style) -> tuple[object, ...] | None:
        """Everything besides its line that a row's drawing depends on (`style`: the log's own,
        worked out once a frame); None when the log has a border, padding, outline, hatch or
        tint (rows then depend on where they are: not kept)."""
        styles = self.styles
        if any(styles.gutter) or any(edge for edge, _color in styles.outline) or styles.tint.a:
            return None
        if styles.has_rule("hatch") and styles.hatch != "none":
            return None
        app = self.app
        return (
            self.size,
            self.content_region.size,
            self.scroll_offset.x,
            self._widest_line_width,
            style,
            self.background_colors,
            self.opacity,
            styles.text_opacity,
            app.ansi_theme,
            app.native_ansi_color,
        )

    def render_lines(self, crop: Region) -> list[Strip]:
        """The rows of `crop`, those already drawn at another scroll taken as they were.

        Textual keeps a widget's styled rows by their place on screen, and a scroll (a line
        added to a followed log) marks every place changed. Here rows are kept by their line
        instead, and handed to Textual's cache (`_styles_cache`, Textual 8.2) before it draws:
        it draws only the rows it has not got, the log's new lines."""
        style = self.rich_style
        look = self._look(style)
        if look != self._rows_look or look is None:
            self._rows.clear()
            self._rows_look = look
        if look is None:
            return super().render_lines(crop)
        cache = self._styles_cache
        first = int(self.scroll_offset.y) + self._start_line
        end = self._start_line + len(self.lines)
        for y in crop.line_range:
            row = self._rows.get(first + y)
            if row is not None:
                cache._cache[y] = row
                cache._dirty_lines.discard(y)
            elif first + y < end:
                self.rows_styled += 1
        self._frame = (style, self.scrollable_content_region.width)
        try:
            strips = super().render_lines(crop)
        finally:
            self._frame = None
        for y in crop.line_range:
            if first + y < end and y in cache._cache:
                self._rows[first + y] = cache._cache[y]
        height = max(1, self.size.height)
        if len(self._rows) > 3 * height:  # a few screens: the rows around the one shown
            self._rows = {n: row for n, row in self._rows.items() if first - height <= n < first + 2 * height}
        return strips

    def render_line(self, y: int) -> Strip:
        if self._frame is None:
            return super().render_line(y)
        style, width = self._frame
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        if index >= len(self.lines):
            return Strip.blank(width, style)
        key = (index + self._start_line, scroll_x, width, self._widest_line_width)
        line = self._line_cache.get(key)
        if line is None:  # as `RichLog` draws a line, with the style worked out once a frame
            line = self._line_cache[key] = self.lines[index].crop_extend(scroll_x, scroll_x + width, style)
        return line.apply_style(style)


def _fitting_lines(text: Text, width: int) -> list[str] | None:
    """The lines of a one-style text that fits `width` as they are, or None: Rich would wrap,
    cut, expand or style them, and is asked to."""
    if text.spans or text.justify not in (None, "default") or text.end != "\n" or "\t" in text.plain:
        return None
    lines = text.plain.split("\n")
    if not all(lines) or any(cell_len(line) > width for line in lines):
        return None
    return lines


def _rendered(
    console: Console, text: RenderableType, width: int | None, room: int, min_width: int
) -> tuple[int, list[list[Segment]]]:
    """The width `RichLog.write` draws `text` at, and its lines as Rich renders them there."""
    from rich.measure import measure_renderables

    options = console.options
    if width is None:  # its own width, shrunk to the room there is
        width = max(min(measure_renderables(console, options, [text]).maximum, room), min_width)
    return width, list(Segment.split_lines(console.render(text, options.update_width(width))))

"""Panels that update themselves: the app sets one value when a read arrives; each panel is
bound to it, works out the part it shows and redraws only when that part changed."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from loop.core.model import replace
from loop.repo.gitstate import Commit, GitStatus
from loop.store.journal import Event
from loop.views.snapshot import Snapshot
from tests.test_tui import SIZE, app, make, text_of, until
from tests.test_tui_round2 import isolated, output_text  # noqa: F401  (autouse: no user config, fixed git)
from tools import screenshots
from tui.app import LoopdeckApp
from tui.widgets.common import roughly, roughly_ago, set_border, update_static
from tui.widgets.footer import Footer
from tui.widgets.git import GitPanel
from tui.widgets.iteration import IterationPanel
from tui.widgets.journal import JournalPanel
from tui.widgets.output import OutputPanel
from tui.widgets.sources import SourcesPanel
from tui.widgets.tail_log import TailLog


def count_calls(obj: object, name: str) -> list[int]:
    """Counts the calls of `obj`'s method `name` from now on (the list's one item)."""
    calls = [0]
    original = getattr(obj, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    setattr(obj, name, counting)
    return calls


def count_refreshes(widget: Widget) -> list[int]:
    """Counts the widget's redraw requests from now on (the list's one item)."""
    return count_calls(widget, "refresh")


def count_layouts(screen: Screen[object]) -> list[int]:
    """Counts the screen's layouts from now on."""
    return count_calls(screen, "_refresh_layout")


def later(snapshot: Snapshot, n: int) -> Snapshot:
    """The same workspace a moment later: one more journal event, nothing else changed."""
    event = Event(ts=f"2026-11-25T10:00:{n:02d}Z", kind="warning", iteration=None, data={"message": f"m{n}"})
    return dataclasses.replace(snapshot, events=(*snapshot.events, event))


async def test_setting_the_apps_snapshot_updates_every_panel(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        shown = monitor.snapshot
        assert shown is not None and shown.loop is not None
        loop = dataclasses.replace(shown.loop, iteration=99, max_iterations=120, status="paused")
        monitor.snapshot = dataclasses.replace(later(shown, 1), loop=loop)  # one value, nothing else
        await pilot.pause()
        assert "PAUSED · iteration 99/120" in text_of(monitor, "#status-bar")
        assert monitor.query_one(IterationPanel).border_subtitle == "99/120"
        assert "iteration 99 of 120 · paused" in text_of(monitor, "#iteration-facts")
        assert monitor.query_one(JournalPanel).events[-1].data == {"message": "m1"}


async def test_a_panel_redraws_only_when_what_it_shows_changes(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        shown = monitor.snapshot
        assert shown is not None and shown.sources is not None
        panel = monitor.query_one(SourcesPanel)
        screen = count_refreshes(monitor.screen)
        sources = count_refreshes(panel)
        for n in range(5):  # the journal moves on; the task sources do not
            monitor.snapshot = later(shown, n)
            await pilot.pause()
        assert sources == [0], "the task sources were redrawn though nothing they show changed"
        assert screen == [0], "a snapshot repainted the whole screen"
        reports = [replace(r, pending=0) if r.name == "task_file" else r for r in shown.sources.sources]
        fewer = replace(shown.sources, sources=tuple(reports))
        monitor.snapshot = dataclasses.replace(later(shown, 6), sources=fewer)
        await pilot.pause()
        assert sources[0] >= 1


async def test_the_git_panel_follows_the_apps_git_status(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=(80, 40)) as pilot:  # a narrow git panel
        await screenshots.settle(monitor)
        panel = monitor.query_one(GitPanel)
        monitor.git_status = GitStatus(branch="feature/x", head="abc1234", modified=3)
        await until(pilot, lambda: "feature/x @ abc1234" in str(panel.render()))
        assert "3 changed" in str(panel.render())
        long = "a commit message far longer than the panel is wide, however wide"
        commits = (Commit("abc1234", long, ""), Commit("def5678", "short", ""))
        monitor.git_status = GitStatus(branch="feature/x", head="abc1234", commits=commits)
        await until(pilot, lambda: panel.content_size.height == 4)  # a line per commit, cut (…)


async def test_a_long_journal_message_wraps_under_itself_clear_of_time_and_kind(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        log = monitor.query_one("#journal-lines", TailLog)
        lines = [line.text.rstrip() for line in log.lines]
        # Half of 120 columns leaves a message too little room beside the time and the kind: the
        # kind goes (the message says it), and every message keeps its line or hangs under itself.
        assert any(line.endswith("Verification PASSED (exit 0)") for line in lines)
        assert all(line[2] == ":" or line[:9].strip() == "" for line in lines), lines
        assert all(len(line) <= log.scrollable_content_region.width for line in lines)
        await pilot.press("l")  # full screen: the kind column too, every message on its line
        await until(
            pilot,
            lambda: any(
                "verification-passed" in line.text and "PASSED (exit 0)" in line.text for line in log.lines
            ),
        )


async def test_the_output_is_wrapped_again_when_shown_full_screen(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        log = panel.query_one(TailLog)
        assert panel.target is not None
        words = [f"w{n}" for n in range(60)]
        with open(panel.target.path, "a") as out:
            out.write(" ".join(words) + "\n")
        await until(pilot, lambda: "w59" in output_text(monitor))
        narrow = max(line.cell_length for line in log.lines)
        await pilot.press("o")
        await until(pilot, lambda: max(line.cell_length for line in log.lines) > narrow + 20)
        assert " ".join(words) in " ".join(output_text(monitor).split())


def test_a_border_text_set_again_unchanged_redraws_nothing() -> None:
    widget = Widget()
    calls = count_refreshes(widget)
    set_border(widget, title="Task sources", subtitle="3 open · checked 2s ago")
    assert calls == [2]
    set_border(widget, title="Task sources", subtitle="3 open · checked 2s ago")
    assert calls == [2]
    set_border(widget, subtitle="3 open · checked 3s ago")
    assert calls == [3] and widget.border_subtitle == "3 open · checked 3s ago"


class Tailing(App[None]):
    CSS = "TailLog { width: 40; height: 10; } #other { height: auto; }"

    def compose(self) -> ComposeResult:
        yield TailLog(id="log", max_lines=300, auto_scroll=True)
        yield Static("one line", id="other")


async def test_a_tailed_log_wraps_at_its_width_and_never_scrolls_sideways() -> None:
    """A log 40 columns wide shows every word of a long line on lines of at most 40 columns
    (Textual's log wraps at 78 and hides the rest behind a sideways scrollbar)."""
    tailing = Tailing()
    async with tailing.run_test(size=(80, 24)) as pilot:
        log = tailing.query_one(TailLog)
        log.write("word " * 30)
        await pilot.pause()
        assert log.virtual_size.width <= log.scrollable_content_region.width <= 40
        assert not log.show_horizontal_scrollbar
        assert " ".join(line.text.strip() for line in log.lines).split() == ["word"] * 30


async def test_a_followed_log_scrolls_with_the_write_not_a_frame_later() -> None:
    tailing = Tailing()
    async with tailing.run_test(size=(80, 24)) as pilot:
        log = tailing.query_one(TailLog)
        for n in range(30):
            log.write(f"line {n}")
            assert log.scroll_y == log.max_scroll_y > 0 or n < 10
        await pilot.pause()
        log.scroll_to(y=0, animate=False, immediate=True)  # the person scrolled up: stay there
        log.write("one more")
        assert log.scroll_y == 0


TEXTS = [
    Text("plain"),
    Text("12:00:01 iteration-started  the agent began", style="cyan"),
    Text("styled by an object", style=Style(color="red", bold=True)),
    Text("a head  its message\n         wrapped under itself", style="dim"),
    Text("too wide for the log " * 4, style="yellow"),
    Text(""),
    Text("an empty line\n\nbetween"),
    Text("wide ☃ 漢字 cells"),
    Text("a\ttab"),
    Text.assemble(("two ", "bold"), ("styles", "red")),
    Text("trailing spaces   "),
    Text("x" * 38),
    Text("y" * 39),
    Text("left, padded by Rich", justify="left"),
    Text("centred", justify="center"),
]


@pytest.mark.parametrize("width", [None, 38])
async def test_lines_written_together_are_drawn_as_one_at_a_time(width: int | None) -> None:
    """`write_texts` cuts a fitting line of one style into its strip itself: every kind of
    line comes out as `write` draws it, and the log scrolls once for all of them."""
    one, together = Tailing(), Tailing()
    async with one.run_test(size=(80, 24)) as pilot, together.run_test(size=(80, 24)) as pilot2:
        await pilot.pause()
        await pilot2.pause()
        single, batch = one.query_one(TailLog), together.query_one(TailLog)
        for text in TEXTS:
            single.write(text.copy(), width=width)
        scrolls = count_calls(batch, "scroll_to")
        batch.write_texts([text.copy() for text in TEXTS], width=width)
        assert batch.lines == single.lines
        assert [line.cell_length for line in batch.lines] == [line.cell_length for line in single.lines]
        assert batch.virtual_size == single.virtual_size
        assert batch.scroll_y == single.scroll_y == single.max_scroll_y > 0
        assert scrolls == [1]


def gone(keys: list[weakref.ref[FooterKey]], footer: Footer) -> bool:
    return not any(ref() in footer.children for ref in keys)


def collected(keys: list[weakref.ref[FooterKey]]) -> bool:
    gc.collect()
    return all(ref() is None for ref in keys)


async def test_the_footer_keeps_none_of_the_keys_it_drew_before(tmp_path: Path) -> None:
    """The keys on offer change (a loop paused, resumed): the footer draws a new set of keys, and
    the old ones are gone. Textual's footer kept each key it ever drew, through the watcher it
    holds for it: a monitor open for days only ever grew."""
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        snapshot = monitor.snapshot
        assert snapshot is not None and snapshot.loop is not None
        footer = monitor.main.query_one(Footer)
        drawn: list[weakref.ref[FooterKey]] = []
        for status in ("paused", "running", "paused", "running"):
            shown = [weakref.ref(key) for key in footer.query(FooterKey)]
            drawn += shown
            loop = dataclasses.replace(snapshot.loop, status=status)
            monitor.show_snapshot(dataclasses.replace(snapshot, loop=loop))
            await until(pilot, partial(gone, shown, footer))
        await until(pilot, partial(collected, drawn))  # once the last redraw is over
        assert len(footer.query(FooterKey)) > 0


class Shrinking(Tailing):
    CSS = "TailLog { width: 40; height: 1fr; } #other { height: auto; }"


async def test_a_log_shown_at_its_end_stays_there_when_the_panel_gets_shorter() -> None:
    shrinking = Shrinking()
    async with shrinking.run_test(size=(80, 24)) as pilot:
        log = shrinking.query_one(TailLog)
        for n in range(40):
            log.write(f"line {n}")
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y > 0
        shrinking.query_one("#other", Static).update("\n".join(["taller"] * 8))
        await until(pilot, lambda: log.size.height < 20)
        assert log.scroll_y == log.max_scroll_y


async def test_a_layout_elsewhere_does_not_redraw_the_logs_scrollbar() -> None:
    """Textual draws every scrolling widget's scrollbars again on any layout of the screen;
    with the monitor's panels changing every iteration that was most of what a frame cost."""
    tailing = Tailing()
    async with tailing.run_test(size=(80, 24)) as pilot:
        log = tailing.query_one(TailLog)
        for n in range(30):
            log.write(f"line {n}")
        await pilot.pause()
        await pilot.pause()
        bar = count_refreshes(log.vertical_scrollbar)
        other = tailing.query_one("#other", Static)
        for n in range(3):
            other.update(f"line {n}\nand another", layout=True)
            await pilot.pause()
        assert other.size.height == 2
        assert bar == [0]


def count_lines_drawn(log: TailLog) -> list[int]:
    """Counts the log's lines drawn (styled for the screen) from now on."""
    calls = [0]
    original = log.render_line

    def counting(y: int) -> Strip:
        calls[0] += 1
        return original(y)

    log.render_line = counting  # type: ignore[method-assign]
    return calls


async def test_a_followed_log_draws_only_its_new_line() -> None:
    """A line added to a followed log scrolls it: Textual styled every row of it again; the
    rows already drawn are kept by their line, so only the new one is drawn."""
    tailing = Tailing()
    async with tailing.run_test(size=(80, 24)) as pilot:
        log = tailing.query_one(TailLog)
        for n in range(30):
            log.write(f"[{n}] line {n}", scroll_end=True)
        await pilot.pause()
        drawn = count_lines_drawn(log)
        for n in range(30, 35):
            log.write(f"line {n}")
            await pilot.pause()
        assert log.scroll_y == log.max_scroll_y > 0
        assert 0 < drawn[0] <= 5


def drawn_rows(log: TailLog) -> list[list[Segment]]:
    return [list(strip) for strip in log.render_lines(Region(0, 0, log.size.width, log.size.height))]


def fresh_rows(log: TailLog) -> list[list[Segment]]:
    """The rows as Textual draws them, with nothing kept from before."""
    log._rows.clear()
    log._styles_cache.clear()
    return [list(strip) for strip in Widget.render_lines(log, Region(0, 0, log.size.width, log.size.height))]


async def test_rows_kept_are_the_rows_a_fresh_draw_makes() -> None:
    """Whatever happened since (lines dropped at the top, a scroll up, focus, another theme, a
    cleared log written again, a narrower log), the rows shown are those drawn afresh."""
    tailing = Tailing()
    async with tailing.run_test(size=(80, 24)) as pilot:
        log = tailing.query_one(TailLog)

        async def same() -> None:
            await pilot.pause()
            kept = drawn_rows(log)
            assert kept == fresh_rows(log)

        for n in range(5):
            log.write(f"first {n}")
        await same()
        log.clear()  # its lines are numbered from 0 again
        for n in range(5):
            log.write(f"again {n}")  # as wide: only the words differ
        await same()
        for n in range(320):  # 300 kept: the first 20 dropped
            log.write(Text(f"line {n}", style="bold red" if n % 2 else ""))
            if n % 40 == 0:
                await pilot.pause()
        await same()
        log.scroll_to(y=log.max_scroll_y - 4, animate=False, immediate=True)
        await same()
        log.scroll_end(animate=False, immediate=True)
        log.focus()
        await same()
        tailing.theme = "textual-light"
        await same()
        log.styles.color = "red"
        await same()
        log.clear()
        for n in range(15):
            log.write(f"another {n}")
        await same()
        log.styles.width = 25
        await until(pilot, lambda: log.size.width == 25)
        await same()


async def test_a_panels_text_lays_the_screen_out_again_only_when_its_height_changes() -> None:
    tailing = Tailing()
    async with tailing.run_test(size=(80, 24)) as pilot:
        other = tailing.query_one("#other", Static)
        await pilot.pause()
        screen = count_layouts(tailing.screen)
        update_static(other, "another line")  # same height
        await pilot.pause()
        assert screen == [0]
        update_static(other, "two\nlines")
        await pilot.pause()
        assert screen[0] >= 1 and other.size.height == 2
        laid_out = screen[0]
        update_static(other, "x" * 100)  # one line, wrapped to two at 80 columns
        await pilot.pause()
        assert screen == [laid_out] and other.size.height == 2


async def test_a_tailed_log_keeps_a_few_screens_of_drawn_lines_not_a_thousand() -> None:
    """While a log follows its tail every line is drawn under a new key: the cache of drawn
    lines must stay small, or the monitor grows by megabytes for nothing."""
    tailing = Tailing()
    async with tailing.run_test(size=(80, 24)) as pilot:
        log = tailing.query_one(TailLog)
        for n in range(1500):
            log.write(f"event {n}")
            if n % 10 == 0:
                await pilot.pause()
        await pilot.pause()
        assert "event 1499" in log.lines[-1].text
        assert len(log._line_cache) <= TailLog.LINE_CACHE


def test_ages_on_screen_change_every_15_seconds_then_every_minute() -> None:
    """A clock on a panel redraws the panel each time its text changes: an idle monitor must
    not redraw a table every second for a 'checked 12s ago'."""
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)

    def at(seconds: int) -> str:
        return roughly_ago((now - timedelta(seconds=seconds)).isoformat(), now)

    assert [at(s) for s in (0, 14, 15, 29, 30, 59)] == ["just now"] * 2 + ["15s ago"] * 2 + [
        "30s ago",
        "45s ago",
    ]
    assert [at(s) for s in (60, 119, 689)] == ["1m ago", "1m ago", "11m ago"]
    assert roughly(7 * 3600 + 5 * 60 + 59) == "7h 05m"
    assert roughly_ago("not a time", now) == "?"


def clocks_going(app: App[None]) -> list[float]:
    """The intervals of every timer going in the app (its own, its screens', its widgets')."""
    from textual.timer import Timer

    pumps: list[Any] = [app, *app.screen_stack]
    for screen in app.screen_stack:
        pumps.extend(screen.walk_children())
    timers: set[Timer] = set()
    for pump in pumps:
        timers.update(pump._timers)
    return sorted(t._interval for t in timers if t._repeat is None and t._active.is_set() and t._task)


async def test_a_watched_monitor_wakes_once_a_second(tmp_path: Path) -> None:
    """Every panel that ages what it shows (the status bar, the sources, the iteration, the
    workers, the output's look at a silent file) does it on one shared clock: one wake-up a
    second for the app, where each of five panels woke on its own. Git, watched, is read when
    the tree moves: no clock of its own."""
    ws = screenshots.running(tmp_path)
    monitor = screenshots.app_for(ws, watch=True, prompts=False)
    assert isinstance(monitor, LoopdeckApp)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await until(pilot, lambda: monitor.query_one(OutputPanel).target is not None)
        going = [interval for interval in clocks_going(monitor) if interval >= 1.0]
        assert going == [1.0]
        before = text_of(monitor, "#iteration-facts")
        monitor.clock = lambda: screenshots.NOW + timedelta(minutes=5)
        await until(pilot, lambda: text_of(monitor, "#iteration-facts") != before, timeout=5)  # a tick


class TextualDrawnSources(SourcesPanel):
    """The same panel, its rows drawn Textual's own way (from `render`)."""

    render_line = Widget.render_line


def cells_of(strips: list[Strip]) -> list[list[tuple[str, object]]]:
    """Each row as its cells and their styles: what a terminal shows, however cut in segments."""
    return [[(char, segment.style) for segment in strip for char in segment.text] for strip in strips]


class Tables(App[None]):
    CSS = "SourcesPanel { width: 1fr; }"

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.shown = snapshot

    def compose(self) -> ComposeResult:
        yield SourcesPanel(id="ours")
        yield TextualDrawnSources(id="textual")

    def on_mount(self) -> None:
        for panel in self.query(SourcesPanel):
            panel.snapshot = self.shown


@pytest.mark.parametrize("scenario", ["running", "unavailable", "workers", "completed"])
@pytest.mark.parametrize("width", [46, 120])
async def test_the_sources_table_draws_what_textual_draws_from_its_text(
    tmp_path: Path, scenario: str, width: int
) -> None:
    """The table's rows are drawn straight from its text: the same cells in the same styles as
    Textual draws from that text, at any width, for every kind of row (counts, items, off and
    unavailable sources, no loop at all); and drawn again only when the table changes."""
    from loop.views.snapshot import read

    snapshot = read(make(tmp_path, "running" if scenario == "unavailable" else scenario))
    if scenario == "unavailable":  # a source that could not be read, beside one that is off
        assert snapshot.sources is not None
        first, *rest = snapshot.sources.sources
        failed = replace(first, available=False, error="gh: not logged in to github.com, run gh auth login")
        snapshot = dataclasses.replace(snapshot, sources=replace(snapshot.sources, sources=(failed, *rest)))
    tables = Tables(snapshot)
    async with tables.run_test(size=(width, 40)) as pilot:
        await pilot.pause()
        ours = tables.query_one("#ours", SourcesPanel)
        textual = tables.query_one("#textual", SourcesPanel)
        assert ours.size == textual.size and ours.size.height > 2
        region = Region(0, 0, *ours.outer_size)
        assert cells_of(ours.render_lines(region)) == cells_of(textual.render_lines(region))
        drawn = ours.lines
        ours.refresh()
        await pilot.pause()
        assert ours.lines is drawn  # the same table: nothing drawn again


async def test_a_sources_table_narrower_than_its_counts_cuts_its_rows_rather_than_pushing_them_down(
    tmp_path: Path,
) -> None:
    """Narrower than the counts' columns (Textual would wrap the header onto a second row and
    lose the table's last row below the panel), each row keeps its one line, cut with "…"."""
    from loop.views.snapshot import read

    tables = Tables(read(make(tmp_path, "running")))
    async with tables.run_test(size=(30, 40)) as pilot:
        await pilot.pause()
        ours = tables.query_one("#ours", SourcesPanel)
        width = ours.size.width
        table = ours.text_at(width).plain.splitlines()
        strips = [ours.render_line(y) for y in range(ours.size.height)]
        rows = ["".join(segment.text for segment in strip).rstrip() for strip in strips]
        assert len(rows) == len(table) == ours.size.height
        assert rows[0].startswith("source") and rows[0].endswith("…") and len(rows[0]) == width
        assert all(len(row) <= width for row in rows)


async def test_the_shared_second_never_ticks_into_a_screen_being_torn_down(tmp_path: Path) -> None:
    """The panels' second is the app's: while a screen is taken down (the app quitting) its
    panels' parts may be gone, and a tick then must not reach them (a panel's own clock
    stopped with it)."""
    from tui.widgets.clocks import second_of

    ws = screenshots.running(tmp_path)
    monitor = screenshots.app_for(ws, prompts=False)
    assert isinstance(monitor, LoopdeckApp)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        second = second_of(monitor)
        ticked: list[str] = []

        def recorder(widget: Widget) -> Callable[[], object]:
            return lambda: ticked.append(type(widget).__name__)

        second.ticking = [(widget, recorder(widget), clocks) for widget, _callback, clocks in second.ticking]
        second.tick()
        assert "IterationPanel" in ticked
        ticked.clear()
        monitor.screen._closing = True  # as the app does first when it quits
        try:
            second.tick()
        finally:
            monitor.screen._closing = False
        assert ticked == []
        await pilot.pause()

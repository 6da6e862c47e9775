"""Panels that update themselves: the app sets one value when a read arrives; each panel is
bound to it, works out the part it shows and redraws only when that part changed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widget import Widget

from loop.gitstate import GitStatus
from loop.journal import Event
from loop.model import replace
from loop.snapshot import Snapshot
from tests.test_tui import SIZE, app, make, text_of, until
from tests.test_tui_round2 import isolated  # noqa: F401  (autouse: no user config, fixed git)
from tui import screenshots
from tui.widgets.common import TailLog, roughly, roughly_ago, set_border
from tui.widgets.git import GitPanel
from tui.widgets.iteration import IterationPanel
from tui.widgets.journal import JournalPanel
from tui.widgets.sources import SourcesPanel


def count_refreshes(widget: Widget) -> list[int]:
    """Counts the widget's redraw requests from now on (the list's one item)."""
    calls = [0]
    original = widget.refresh

    def counting(*args: object, **kwargs: object) -> Widget:
        calls[0] += 1
        return original(*args, **kwargs)  # type: ignore[arg-type]

    widget.refresh = counting  # type: ignore[method-assign]
    return calls


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
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        monitor.git_status = GitStatus(branch="feature/x", head="abc1234", modified=3)
        await until(pilot, lambda: "feature/x @ abc1234" in str(monitor.query_one(GitPanel).render()))
        assert "changed 3" in str(monitor.query_one(GitPanel).render())


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
    def compose(self) -> ComposeResult:
        yield TailLog(id="log", max_lines=300, auto_scroll=True)


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

"""The monitor's pictures of progress: the Progress view (g), the main screen's panel, the
fleet's sparklines, and the reader that follows the journal for them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from loop.store.journal import Journal
from loop.views import fleet
from tests.test_tui import app, make, until, until_seen
from tools import screenshots
from tui.progress import ProgressReader
from tui.screens.main import MainScreen
from tui.screens.progress import ProgressScreen
from tui.widgets.progress import ProgressChart, ProgressPanel, headline, ticks

SIZE = screenshots.SIZE


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    monkeypatch.setenv("LOOPDECK_KEYMAP", str(tmp_path / "no-keymap.toml"))
    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)


def _judged(ws: Any, n: int, failed: int, passed: int) -> None:
    Journal(ws.journal).append(
        "progress",
        n,
        {"tasks": {"open": 3, "done": 2}, "tests": {"passed": passed, "failed": failed}, "moved": []},
        now=screenshots.NOW + timedelta(seconds=n),
    )


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_progress_view_snapshot(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    ws = make(tmp_path, "progress")

    async def run_before(pilot: Pilot[None]) -> None:
        await screenshots.settle(pilot.app)
        await pilot.press("g")
        await screenshots.settle(pilot.app)
        await pilot.pause()

    assert snap_compare(screenshots.app_for(ws), terminal_size=size, run_before=run_before)


async def test_g_opens_the_charts_and_g_or_escape_closes_them(tmp_path: Path) -> None:
    monitor = app(make(tmp_path, "progress"), git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        for close in ("escape", "g"):
            await pilot.press("g")
            await until(pilot, lambda: isinstance(monitor.screen, ProgressScreen))
            charts = {c.chart.id: c for c in monitor.screen.query(ProgressChart)}
            assert set(charts) == {"tasks", "tests", "cost", "durations"}
            assert not any(c.empty for c in charts.values())
            headline_text = str(monitor.screen.query_one("#progress-headline", Static).render())
            assert "failing 10 → 0" in headline_text and "passing 0 → 10" in headline_text
            await pilot.press(close)
            await until(pilot, lambda: isinstance(monitor.screen, MainScreen))


async def test_the_charts_follow_the_journal_as_it_grows(tmp_path: Path) -> None:
    """A `progress` event appended while the view is open reaches its charts through the app's
    own watch of the loop's files (no watcher of its own)."""
    ws = make(tmp_path, "running")  # no test counts yet
    monitor = app(ws, git=False, watch=True)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(monitor.screen, ProgressScreen))
        tests = monitor.screen.query_one("#chart-tests", ProgressChart)
        assert tests.empty and "No test results yet" in str(tests.query_one(".empty", Static).render())
        await until_seen(pilot, lambda: _judged(ws, 11, 4, 6), lambda: not tests.empty)
        assert monitor.progress.points[-1].tests_failed == 4
        _judged(ws, 12, 1, 9)
        await until(pilot, lambda: monitor.progress.points[-1].tests_failed == 1)
        assert "failing 4 → 1" in str(monitor.screen.query_one("#progress-headline", Static).render())


async def test_a_loop_of_workers_charts_its_turns_and_their_cost(tmp_path: Path) -> None:
    """Workers' turns journal their time and cost when they end (no iteration of the runner's):
    the turn-time and cost charts draw them."""
    ws = make(tmp_path, "running")
    for n, (worker, took, cost) in enumerate((("worker-1", 12.0, 0.5), ("worker-2", 30.0, 0.25)), start=11):
        data = {
            "worker": worker,
            "task": str(n),
            "turn": 1,
            "exit_code": 0,
            "duration_s": took,
            "cost_usd": cost,
        }
        Journal(ws.journal).append("worker-ended", n, data, now=screenshots.NOW + timedelta(seconds=n))
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(monitor.screen, ProgressScreen))
        charts = {c.chart.id: c for c in monitor.screen.query(ProgressChart)}
        assert not charts["cost"].empty and not charts["durations"].empty
        assert [p.cost_usd for p in monitor.progress.points][-2:] == [0.5, 0.75]


async def test_the_main_screen_panel_shows_where_there_is_room(tmp_path: Path) -> None:
    monitor = app(make(tmp_path, "progress"), git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.main.query_one(ProgressPanel)
        assert panel.display and panel.region.height > 0
        assert "failing 10 → 0" in str(panel.query_one("#progress-line", Static).render())
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: not panel.display)


async def test_no_panel_before_the_loop_has_a_figure(tmp_path: Path) -> None:
    monitor = app(make(tmp_path, "running"), git=False)
    async with monitor.run_test(size=SIZE):
        await screenshots.settle(monitor)
        assert not monitor.main.query_one(ProgressPanel).display


def test_the_reader_reads_only_what_was_appended(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    reader = ProgressReader(journal)
    assert reader.read().points == []
    Journal(journal).append("iteration-completed", 1, {"duration_s": 30, "cost_usd": 0.5})
    Journal(journal).append("loop-started", 0, {})
    _judged(type("W", (), {"journal": journal}), 1, 3, 1)
    first = reader.read()
    assert [(p.iteration, p.tests_failed, p.cost_usd, p.duration_s) for p in first.points] == [
        (1, 3, 0.5, 30.0)
    ]
    assert reader.read() is first  # nothing new: the same series, not worked out again
    Journal(journal).append("iteration-completed", 2, {"duration_s": 20, "cost_usd": 0.25})
    assert [p.cost_usd for p in reader.read().points] == [0.5, 0.75]
    journal.unlink()  # a new loop's journal: read from its start
    Journal(journal).append("iteration-completed", 1, {"duration_s": 5})
    assert [(p.iteration, p.duration_s, p.cost_usd) for p in reader.read().points] == [(1, 5.0, None)]


def test_the_headline_and_the_ticks() -> None:
    from loop.views.progress import Series

    assert headline(Series()).startswith("No iteration recorded yet")
    assert ticks(0, 10, 5, whole=True) == [0, 5, 10]
    assert ticks(0, 10, 6, whole=True) == [0, 2, 4, 6, 8, 10]
    assert ticks(0, 0.85, 5) == [0, 0.25, 0.5, 0.75]
    assert ticks(1, 2, 6, whole=True) == [1, 2]


def test_a_fleet_row_carries_its_tests_failing(tmp_path: Path) -> None:
    ws = make(tmp_path, "progress")
    [row] = fleet.read_rows(ws.root)
    assert row.trend_of == "failing"
    assert row.trend == tuple(float(n) for n in screenshots.FAILING)
    [plain] = fleet.read_rows(make(tmp_path, "running").root)
    assert plain.trend == () and plain.trend_of == ""

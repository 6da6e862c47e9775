"""What a new user met on the monitor's screen in the first hour: notices over the panels, a help
that showed two keys a screen, a fleet cut at 80 columns, a chart of nothing, a worker's output
never shown. Each looked at as a person would (what is on screen, where), and as snapshots at
80x24 and 120x40."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Sparkline
from textual.widgets._toast import Toast

from loop.store.paths import Workspace
from tools import screenshots
from tui.app import LoopdeckApp
from tui.screens.fleet import FleetScreen
from tui.screens.text import TextScreen
from tui.widgets.common import wrap_words
from tui.widgets.output import OutputPanel
from tui.widgets.status_bar import StatusBar

SIZES = [(80, 24), (120, 40)]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    monkeypatch.setenv("LOOPDECK_TRUST_HOME", str(tmp_path / "trust"))
    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)


def starting(root: Path) -> Workspace:
    """A loop in its first iteration: no iteration has a timing yet."""
    ws = screenshots._repo(root)
    screenshots._state(ws, 0, iteration=1, status="running", driver="runner", pid=os.getpid())
    return ws


def make(tmp_path: Path, name: str) -> Workspace:
    folder = tmp_path / name / screenshots.PROJECT
    return starting(folder) if name == "starting" else screenshots.SCENARIOS[name](folder)


def app(ws: Workspace, **kw: Any) -> LoopdeckApp:
    made = screenshots.app_for(ws, **kw)
    assert isinstance(made, LoopdeckApp)
    return made


NOTICES = [f"pause sent to the runner ({n})" for n in range(5)]


def notify_all(monitor: LoopdeckApp) -> None:
    for line in NOTICES:
        monitor.notify(line, title="loopdeck", timeout=600)


# --- notices -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_burst_of_notices_stays_over_the_right_hand_panels(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    monitor = app(make(tmp_path, "running"), git=False)
    async with monitor.run_test(size=size, notifications=True) as pilot:
        await screenshots.settle(monitor)
        notify_all(monitor)
        await screenshots.settle(monitor)
        await pilot.pause()
        toasts = list(monitor.screen.query(Toast))
        assert len(toasts) == (2 if size[1] < 30 else 3)  # the newest ones
        logs = monitor.query_one("#logs").region
        right = monitor.query_one("#right").region
        for toast in toasts:
            assert toast.region.bottom <= logs.y, (toast.region, logs)  # never over the logs
            assert toast.region.x >= right.x - 2, (toast.region, right)  # over the right column


# --- help --------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_help_shows_many_keys_a_screen_and_says_it_scrolls(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    monitor = app(make(tmp_path, "running"), git=False)
    async with monitor.run_test(size=size) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("question_mark")
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, TextScreen)
        shown = monitor.export_screenshot()
        first = ("loop.pause", "loop.resume", "loop.skip", "loop.complete", "loop.stop", "loop.set_max")
        assert all(k.replace("_", "&#95;") in shown or k in shown for k in first), shown  # six keys at once
        assert "more below" in str(monitor.screen.query_one("Vertical").border_subtitle)
        await pilot.press("end")
        await pilot.pause()
        assert str(monitor.screen.query_one("Vertical").border_subtitle).startswith("end")


# --- the fleet ---------------------------------------------------------------------------------


async def test_the_fleet_keeps_every_column_at_80_columns(tmp_path: Path) -> None:
    monitor = app(make(tmp_path, "fleet"), git=False)
    async with monitor.run_test(size=(80, 24)):
        await screenshots.settle(monitor)
        screen = monitor.screen
        assert isinstance(screen, FleetScreen)
        table = screen.query_one(DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert [label.replace("\n", " ") for label in labels][-3:] == ["Waiting for", "Last event", "Cost"]
        assert table.virtual_size.width <= table.scrollable_content_region.width  # nothing off the edge
        assert table.max_scroll_x == 0
        row = [str(c) for c in table.get_row_at(1)]  # web, a read-only loop from another tool
        assert row[0] == "web\ncontinuous-session" and row[1] == "● paused\nread-only"


# --- the footer, the sources, the bar, the chart -----------------------------------------------


async def test_the_footer_offers_a_note_for_the_agent(tmp_path: Path) -> None:
    monitor = app(make(tmp_path, "running"), git=False)
    async with monitor.run_test(size=(80, 24)):
        await screenshots.settle(monitor)
        keys = {k.key: k.description for k in monitor.screen.query("FooterKey")}  # type: ignore[attr-defined]
        assert keys.get("t") == "Tell"
        quit_key = next(k for k in monitor.screen.query("FooterKey") if getattr(k, "key", "") == "q")
        assert quit_key.region.right <= 80


async def test_sources_bar_and_chart_say_nothing_twice_or_falsely(tmp_path: Path) -> None:
    monitor = app(make(tmp_path, "starting"), git=False)
    async with monitor.run_test(size=(120, 40)):
        await screenshots.settle(monitor)
        sources = str(monitor.query_one("#sources").render())
        assert "[~] " not in sources or ": " not in sources.split("[~] ", 1)[1][:4]
        assert "GitHub project" in sources and "GitHub project  -" not in " ".join(sources.split())
        assert " - " not in sources.splitlines()[1]  # an off source: its reason, no dashes
        bar = str(monitor.query_one(StatusBar).render())
        assert "runner running" not in bar and bar.endswith(f"runner · {screenshots.PROJECT}")
        assert "no timings yet" in str(monitor.query_one("#iteration-facts").render())
        assert not monitor.query_one(Sparkline).display  # no chart of a timing nobody has


# --- a loop of workers -------------------------------------------------------------------------


async def test_the_output_follows_the_highlighted_worker(tmp_path: Path) -> None:
    monitor = app(make(tmp_path, "workers"), git=False)
    async with monitor.run_test(size=(120, 40)) as pilot:
        await screenshots.settle(monitor)
        output = monitor.query_one(OutputPanel)
        assert output.target is not None and output.target.path.endswith("workers/worker-3.02.log")
        log = "\n".join(line.text for line in output.query_one("#output-lines").lines)  # type: ignore[attr-defined]
        assert "worker-3: my task edits CHANGELOG.md." in log
        assert "waiting for the agent's output" not in log
        await pilot.press("down", "down")  # worker-5
        await screenshots.settle(monitor)
        assert output.target is not None and output.target.path.endswith("workers/worker-5.01.log")
        log = "\n".join(line.text for line in output.query_one("#output-lines").lines)  # type: ignore[attr-defined]
        assert "worker-5: my task edits src/api.py." in log
        assert "worker-5 turn 1" in str(output.border_subtitle)


def test_a_branch_too_long_for_a_line_breaks_after_a_slash() -> None:
    lines = wrap_words("Task 2 queued to merge (loopdeck/20260109T095712/2)", 26, 26)
    assert lines == ["Task 2 queued to merge", "(loopdeck/20260109T095712/", "2)"]


# --- snapshots ---------------------------------------------------------------------------------


def settled(
    then: Callable[[Pilot[None]], Awaitable[None]] | None = None,
) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        await screenshots.settle(pilot.app)
        if then is not None:
            await then(pilot)
            await screenshots.settle(pilot.app)
        await pilot.pause()

    return run_before


async def with_notices(pilot: Pilot[None]) -> None:
    assert isinstance(pilot.app, LoopdeckApp)
    notify_all(pilot.app)


async def with_help(pilot: Pilot[None]) -> None:
    await pilot.press("question_mark")


VIEWS: dict[str, tuple[str, Callable[[Pilot[None]], Awaitable[None]] | None]] = {
    "notices": ("running", with_notices),
    "help": ("running", with_help),
    "fleet": ("fleet", None),
    "iteration-untimed": ("starting", None),
    "workers": ("workers", None),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(VIEWS))
def test_first_hour_snapshot(snap_compare: Any, tmp_path: Path, view: str, size: tuple[int, int]) -> None:
    scenario, then = VIEWS[view]
    ws = make(tmp_path, scenario)
    assert snap_compare(screenshots.app_for(ws), terminal_size=size, run_before=settled(then))

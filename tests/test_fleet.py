"""Many loops: the scan, the fleet rows, the fleet screen, and neighbour loops in the monitor."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from loop.store.paths import Workspace
from loop.views import fleet
from tests.conftest import FIXTURES, Ran
from tools import screenshots
from tui.monitor import FLEET, MonitorApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import FleetScreen, FleetTable
from tui.screens.neighbour import NeighbourScreen

SIZE = screenshots.SIZE
RALPH = FIXTURES / "formats" / "ralph-loop.local.md"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)


async def until(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if check():
            return
    raise AssertionError("the screen never showed it")


def ralph_in(folder: Path) -> Path:
    (folder / ".claude").mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(RALPH, folder / ".claude" / "ralph-loop.local.md"))


def session_in(folder: Path, status: str) -> Path:
    path = folder / "docs" / ".continuous-session-state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"status": status, "currentSession": 1, "queueSnapshot": ["a"]}))
    return path


def commands(ws: Workspace) -> list[dict[str, Any]]:
    if not ws.control.exists():
        return []
    return [json.loads(line) for line in ws.control.read_text().splitlines()]


# --- the scan -----------------------------------------------------------------------------------


def test_scan_finds_loops_and_skips_what_it_should(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text("build/\n")
    ralph_in(root / "a")
    screenshots.running(root / "b" / "c")
    ralph_in(root / "node_modules" / "pkg")
    ralph_in(root / ".venv" / "x")
    ralph_in(root / "build" / "out")
    ralph_in(root / "d1" / "d2" / "d3" / "d4" / "d5")
    session_in(root / "d1" / "d2" / "d3", "running")
    found = fleet.scan(root, depth=4)
    assert found == [root / "a", root / "b" / "c", root / "d1" / "d2" / "d3"]
    assert fleet.scan(root, depth=1) == [root / "a"]


def test_scan_outside_git(tmp_path: Path) -> None:
    ralph_in(tmp_path / "one")
    session_in(tmp_path / "two", "paused")
    assert fleet.scan(tmp_path) == [tmp_path / "one", tmp_path / "two"]


def test_rows_put_who_needs_a_person_first(tmp_path: Path) -> None:
    screenshots.fleet(tmp_path)
    rows = fleet.sort_rows([r for f in fleet.scan(tmp_path) for r in fleet.read_rows(f)])
    assert [(Path(r.folder).name, r.kind) for r in rows] == [
        ("billing", "orchestrator-loop"),
        ("web", "continuous-session"),
        ("api", "orchestrator-loop"),
        ("docs-site", "ralph-loop"),
        ("mobile", "orchestrator-loop"),
    ]
    billing = rows[0]
    assert billing.needs_person and billing.waiting_for == "escalation" and billing.iteration == 51
    assert rows[1].read_only and rows[1].pending == 3


def test_an_unreadable_loop_is_a_row(tmp_path: Path) -> None:
    path = session_in(tmp_path, "running")
    path.write_text('{"status": ')
    [row] = fleet.read_rows(tmp_path)
    assert row.status == "unreadable" and row.problem is not None and ":1:" in row.problem


def test_stamp_changes_with_the_files(tmp_path: Path) -> None:
    path = session_in(tmp_path, "running")
    before = fleet.stamp(tmp_path)
    assert fleet.stamp(tmp_path) == before
    path.write_text(json.dumps({"status": "paused", "currentSession": 2}))
    assert fleet.stamp(tmp_path) != before


# --- the fleet screen ----------------------------------------------------------------------------


async def test_fleet_enter_opens_a_loop_and_escape_goes_back(tmp_path: Path) -> None:
    screenshots.fleet(tmp_path)
    app = screenshots.app_for(Workspace(tmp_path), prompts=False)
    assert isinstance(app, MonitorApp)
    async with app.run_test(size=SIZE) as pilot:
        await screenshots.settle(app)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        assert len(screen.all_rows()) == 5
        await pilot.press("enter")  # the first row: billing, which needs a person
        await until(pilot, lambda: app.snapshot is not None and app.workspace.root == tmp_path / "billing")
        assert not isinstance(app.screen, FleetScreen)
        await pilot.press("x")  # the monitor's keys steer the loop that is open
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: bool(commands(app.workspace)))
        assert commands(app.workspace)[-1]["kind"] == "stop"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        # docs-site's ralph loop: read-only
        await pilot.press("down", "down", "down", "enter")
        await until(pilot, lambda: isinstance(app.screen, NeighbourScreen))
        neighbour = app.screen
        assert isinstance(neighbour, NeighbourScreen) and neighbour.found.kind == "ralph-loop"
        await pilot.press("p", "r", "s", "x", "m")
        assert commands(Workspace(tmp_path / "docs-site")) == []
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))


async def test_fleet_rings_once_when_a_loop_newly_needs_a_person(tmp_path: Path) -> None:
    path = session_in(tmp_path / "one", "running")
    ralph_in(tmp_path / "two")
    app = MonitorApp([Workspace(tmp_path / "one"), Workspace(tmp_path / "two")], git=False, prompts=False)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        screen = app.get_screen(FLEET)
        assert isinstance(screen, FleetScreen)
        await until(pilot, lambda: screen.reads > 0)
        assert rings == []
        path.write_text(json.dumps({"status": "paused", "currentSession": 2, "queueSnapshot": ["a"]}))
        await until(pilot, lambda: screen.bells == 1)
        reads = screen.reads
        await until(pilot, lambda: screen.reads >= reads + 2)  # more reads, no more bells
        assert rings == [1] and screen.bells == 1


# --- neighbours in the monitor --------------------------------------------------------------------


async def test_n_shows_the_neighbour_read_only_and_c_cancels_a_ralph_loop(tmp_path: Path) -> None:
    ws = screenshots.running(tmp_path / "p")
    state = ralph_in(ws.root)
    app = screenshots.app_for(ws, git=False, prompts=False)
    assert isinstance(app, MonitorApp)
    async with app.run_test(size=SIZE) as pilot:
        await screenshots.settle(app)
        assert app.check_action("next_loop", ()) is True
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NeighbourScreen))
        screen = app.screen
        assert isinstance(screen, NeighbourScreen)
        for action in ("pause", "resume", "skip", "stop", "set_max"):
            assert screen.check_action("steer", (action,)) is None, "shown, but disabled"
        footer_tips = {b.binding.key: b.binding.tooltip for b in screen.active_bindings.values()}
        assert "run by its own tool" in footer_tips["p"]
        sent = len(commands(ws))
        await pilot.press("p", "x")
        assert len(commands(ws)) == sent, "nothing reaches loopdeck's queue from a neighbour's screen"
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: not state.exists())
        kept = list((ws.root / ".claude" / "loops").glob("*-ralph-loop/ralph-loop.local.md"))
        assert len(kept) == 1 and kept[0].read_bytes() == RALPH.read_bytes()
        await until(pilot, lambda: screen.gone)
        assert screen.check_action("cancel_loop", ()) is None
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, NeighbourScreen))


async def test_the_keys_on_offer_are_worked_out_once_a_snapshot_with_the_neighbours_it_found(
    tmp_path: Path,
) -> None:
    """Every key's check runs for each snapshot (several a second while a loop runs): once, with
    the neighbours already looked for, so a neighbour that just appeared is on offer at once."""
    ws = screenshots.running(tmp_path / "p")
    app = screenshots.app_for(ws, git=False, prompts=False)
    assert isinstance(app, MonitorApp)
    async with app.run_test(size=SIZE) as pilot:
        await screenshots.settle(app)
        assert app.check_action("next_loop", ()) is False
        asked: list[bool] = []
        check = app.check_action

        def checking(action: str, parameters: tuple[object, ...]) -> bool | None:
            answer = check(action, parameters)
            if action == "next_loop":
                asked.append(bool(answer))
            return answer

        app.check_action = checking  # type: ignore[method-assign]
        ralph_in(ws.root)
        snapshot = app.snapshot
        assert snapshot is not None
        app.show_snapshot(snapshot)
        assert asked == [True]
        await pilot.pause()


async def test_a_folder_with_only_a_neighbour_opens_on_it(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    path = ralph_in(tmp_path)
    app = MonitorApp([ws], git=False, prompts=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, NeighbourScreen))
        screen = app.screen
        assert isinstance(screen, NeighbourScreen)
        assert screen.check_action("leave", ("back",)) is False, "nothing to go back to"
        path.write_text(RALPH.read_text().replace("iteration: 1", "iteration: 2"))
        await until(pilot, lambda: screen.found.loop is not None and screen.found.loop.iteration == 2)
        path.write_text("not front matter")
        await until(pilot, lambda: screen.found.problem is not None)
        assert "front matter" in str(screen.found.problem)


async def test_a_claude_code_goal_in_the_folder_is_shown_read_only(tmp_path: Path) -> None:
    """Claude Code's own `/goal`, active in the folder's newest session, is listed next to
    loopdeck's loop; its screen steers nothing (Claude Code runs it; `/goal clear` ends it)."""
    from loop.formats.claude_goal import project_folder

    ws = screenshots.running(tmp_path / "p")
    folder = project_folder(ws.root)
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text((FIXTURES / "samples" / "real-cli" / "goal-active.jsonl").read_text())
    app = screenshots.app_for(ws, git=False, prompts=False)
    assert isinstance(app, MonitorApp)
    async with app.run_test(size=SIZE) as pilot:
        await screenshots.settle(app)
        assert [f.kind for f in app.neighbours] == ["claude-goal"]
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NeighbourScreen))
        screen = app.screen
        assert isinstance(screen, NeighbourScreen) and screen.found.loop is not None
        assert screen.found.loop.prompt == "an impossible thing"
        for action in ("pause", "resume", "skip", "stop", "set_max"):
            assert screen.check_action("steer", (action,)) is None, "shown, but disabled"
        assert screen.check_action("cancel_loop", ()) is None
        sent = len(commands(ws))
        await pilot.press("p", "x", "c")
        assert len(commands(ws)) == sent


# --- the verbs ------------------------------------------------------------------------------------


def test_tui_verbs_build_the_right_monitor(tmp_path: Path) -> None:
    from loop.cli import build_parser
    from tui.cli import monitor_app

    parser = build_parser()
    one = monitor_app(parser.parse_args(["tui", str(tmp_path)]))
    assert not one.fleet_mode
    (tmp_path / "a").mkdir()
    two = monitor_app(parser.parse_args(["tui", str(tmp_path), str(tmp_path / "a")]))
    assert two.fleet_mode and len(two.workspaces) == 2
    scan = monitor_app(parser.parse_args(["tui", "--scan", str(tmp_path), "--depth", "2"]))
    assert scan.fleet_mode and scan.scan_root == tmp_path.resolve() and scan.scan_depth == 2


def test_tui_refuses_a_missing_folder(cli: Callable[..., Ran], tmp_path: Path) -> None:
    ran = cli("tui", "--scan", str(tmp_path / "nope"))
    assert ran.code == 1 and "not a folder" in ran.err
    ran = cli("tui", str(tmp_path), str(tmp_path / "nope"))
    assert ran.code == 1 and "is not a folder" in ran.err


def test_cost_is_summed_when_the_agent_reports_it(tmp_path: Path) -> None:
    from loop.store.journal import Journal

    ws = screenshots.running(tmp_path / "p")
    journal = Journal(ws.journal)
    journal.append("iteration-completed", 13, {"duration_s": 40, "cost_usd": 0.42})
    journal.append("iteration-completed", 14, {"duration_s": 40, "total_cost_usd": 1.1})
    [row] = fleet.read_rows(ws.root)
    assert row.cost_usd == 1.52
    assert FleetScreen.cells(row, str(tmp_path), screenshots.NOW)[-1] == "$1.52"


def test_a_stamp_works_out_its_paths_once_and_still_sees_every_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fleet stamps every workspace every second: the paths are built once per workspace
    (a bounded memory of them), a missing folder is one look, and any loop file's change shows."""
    folder = tmp_path / "ws"
    (folder / ".claude").mkdir(parents=True)
    first = fleet.stamp(folder)
    built: list[Path] = []
    real_workspace = Workspace

    def workspace(root: Path) -> Any:
        built.append(root)
        return real_workspace(root)

    monkeypatch.setattr(fleet, "Workspace", workspace)
    assert fleet.stamp(folder) == first
    assert built == []
    ws = real_workspace(folder)
    ws.journal.parent.mkdir(parents=True, exist_ok=True)
    ws.journal.write_text('{"kind": "x"}\n')
    second = fleet.stamp(folder)
    assert second != first
    (folder / "docs").mkdir()
    assert fleet.stamp(folder) == second  # an empty folder is no loop file
    (folder / "docs" / ".continuous-session-state.json").write_text("{}")
    assert fleet.stamp(folder) != second
    monkeypatch.setattr(fleet, "KEEP_STAMP_PATHS", 3)
    for n in range(10):
        fleet.stamp(tmp_path / f"other{n}")
        assert len(fleet._stamp_paths_of) <= 3


def clock_timers(app: MonitorApp) -> dict[str, list[bool]]:
    """Each panel of the main screen: whether each of its clocks is going."""
    from tui.widgets.clocks import Clocks

    going: dict[str, list[bool]] = {}
    for widget in app.main.walk_children():
        clocks = getattr(widget, "clocks", None)
        if isinstance(clocks, Clocks):
            going[type(widget).__name__] = clocks.going()
    return going


async def test_the_panels_clocks_rest_behind_the_fleet_and_tick_when_shown(tmp_path: Path) -> None:
    """Behind the fleet nobody sees the panels: their clocks rest, and go again (ticking at once)
    when a loop is opened; back on the fleet they rest again."""
    screenshots.fleet(tmp_path)
    app = screenshots.app_for(Workspace(tmp_path), prompts=False)
    assert isinstance(app, MonitorApp)
    async with app.run_test(size=SIZE) as pilot:
        await screenshots.settle(app)
        assert isinstance(app.screen, FleetScreen)
        hidden = clock_timers(app)
        assert {"StatusBar", "IterationPanel", "SourcesPanel", "WorkersPanel"} <= set(hidden)
        assert not any(going for timers in hidden.values() for going in timers)
        await pilot.press("enter")  # billing: a loop of loopdeck's
        await until(pilot, lambda: app.snapshot is not None and app.workspace.root == tmp_path / "billing")
        await until(pilot, lambda: not isinstance(app.screen, FleetScreen))
        shown = clock_timers(app)
        assert all(shown[name][0] for name in ("StatusBar", "IterationPanel", "SourcesPanel", "WorkersPanel"))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        await until(pilot, lambda: not any(t for timers in clock_timers(app).values() for t in timers))


async def test_the_fleet_ages_change_once_a_minute_all_at_once(tmp_path: Path) -> None:
    """A cell that changes redraws the table's whole visible part: the "Last event" column is
    touched only when the clock's minute turns, never while a row's seconds go by."""
    from datetime import UTC, datetime

    path = session_in(tmp_path / "one", "running")
    event = datetime(2026, 1, 1, 10, 0, 5, tzinfo=UTC)
    os.utime(path, (event.timestamp(), event.timestamp()))
    now = [datetime(2026, 1, 1, 10, 0, 20, tzinfo=UTC)]
    screen = FleetScreen([tmp_path / "one"], clock=lambda: now[0], poll=False)
    app = MonitorApp([Workspace(tmp_path / "one")], git=False, prompts=False, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(screen)
        await until(pilot, lambda: screen.reads > 0)
        table = screen.query_one(FleetTable)
        (row,) = screen.all_rows()
        key = f"{row.folder}\0{row.kind}"
        assert table.get_cell(key, "Last event") == "just now"
        updated: list[str] = []
        real = table.update_cell

        def update_cell(row: Any, column: Any, value: str, **kw: Any) -> None:
            updated.append(value)
            real(row, column, value, **kw)

        table.update_cell = update_cell  # type: ignore[method-assign,assignment]
        now[0] = datetime(2026, 1, 1, 10, 0, 59, tzinfo=UTC)  # 54 s after the event: the same minute
        for _ in range(10):
            screen.tick()
        await until(pilot, lambda: screen.reads > 1 and not screen.busy)
        assert updated == [] and table.get_cell(key, "Last event") == "just now"
        now[0] = datetime(2026, 1, 1, 10, 1, 1, tzinfo=UTC)  # the minute turned
        screen.tick()
        assert updated == ["1m ago"] and table.get_cell(key, "Last event") == "1m ago"
        for _ in range(10):
            screen.tick()
        assert updated == ["1m ago"]


def test_the_monitor_without_a_terminal_says_what_to_use_instead(
    cli: Callable[..., Ran], tmp_path: Path
) -> None:
    """With stdin or stdout not a terminal the monitor would read an ended input forever at
    full speed and draw into a file: it says what works without one instead."""
    ran = cli("tui", str(tmp_path))
    assert ran.code == 1 and "the monitor needs a terminal" in ran.err and "loopdeck status" in ran.err

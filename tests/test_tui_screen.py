"""The monitor as a person at 80x24 and 120x40 meets it: whole titles and reasons, prompts that
fit with every button on screen, panels that never collapse, Escape that always goes back (and a
footer that says so, even while searching), notices that hide no log, a finished screen that
names the tasks, verification rows that name the command, and one key registry for every
screen, rebindable by id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.containers import Vertical
from textual.geometry import Region
from textual.screen import Screen
from textual.widgets import Button

from loop.demo.workspace import TASKS as DEMO_TASKS
from loop.store.journal import Journal
from tests.test_tui import app, commands, make, text_of, until
from tools import screenshots
from tui import actions
from tui.app import LoopdeckApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.escalation import EscalationScreen
from tui.screens.fleet import FleetScreen
from tui.screens.main import MainScreen
from tui.screens.neighbour import NeighbourScreen
from tui.screens.number import NumberScreen
from tui.screens.resume import ResumeScreen
from tui.screens.text import NoteScreen, QuestionScreen, TextScreen
from tui.widgets.iteration import finished_text
from tui.widgets.journal import JournalPanel
from tui.widgets.output import OutputPanel
from tui.widgets.sources import table_text
from tui.widgets.verification import command_label
from tui.widgets.workers import WorkersPanel

SMALL = (80, 24)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    monkeypatch.setenv("LOOPDECK_KEYMAP", str(tmp_path / "no-keymap.toml"))
    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)


def screen_text(monitor: LoopdeckApp) -> str:
    import html

    return html.unescape(monitor.export_screenshot()).replace("\xa0", " ")


def footer(monitor: LoopdeckApp) -> dict[str, str]:
    """What the footer of the screen in front offers: its words, by key."""
    return {k.key: k.description for k in monitor.screen.query("FooterKey")}  # type: ignore[attr-defined]


# --- 80x24: nothing cut, nothing collapsed ------------------------------------------------------------


async def test_at_80x24_titles_and_reasons_are_whole_and_the_journal_hangs_beside_the_time(
    tmp_path: Path,
) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL):
        await screenshots.settle(monitor)
        sources = str(monitor.query_one("#sources").render())
        assert "[~] Expose the list endpoint" in sources  # no line number to read as a task id
        assert "off: turned off (--no-github)" in sources and "off: turned off (--no-tasks)" in sources
        joined = " ".join(sources.split())
        assert "no transcript known yet (the hook records it at the first Stop)" in joined
        assert "…" not in sources
        assert "task: Expose the list endpoint" in text_of(monitor, "#iteration-facts")
        bar = str(monitor.query_one("#iteration-bar").render())
        assert bar.endswith("2/5 tasks")  # the count whole, the bar gave way
        # A wrapped journal message goes on under itself, never under the time.
        journal = monitor.query_one(JournalPanel)
        lines = [line.text for line in journal.query_one("#journal-lines").lines]  # type: ignore[attr-defined]
        assert lines and all(line[:8].strip() == "" or line[2] == ":" for line in lines), lines
        assert monitor.query_one("#panels").region.bottom <= monitor.query_one("#logs").region.y


async def test_at_80x24_a_workers_loop_keeps_its_table_and_both_logs(tmp_path: Path) -> None:
    ws = make(tmp_path, "workers")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL):
        await screenshots.settle(monitor)
        screen = monitor.screen
        assert screen.max_scroll_y == 0, "the screen scrolls: something fell off its bottom"
        for panel in (JournalPanel, OutputPanel):
            region = monitor.query_one(panel).region
            assert region.height >= 5 and region.bottom <= 23, (panel, region)
        table = monitor.query_one("#workers-table")
        assert table.region.height >= 4  # the header and the three workers
        assert "worker-5" in screen_text(monitor)
        # The keys of the selected worker are on offer: its table has the focus.
        assert monitor.focused is table
        # its keys on the panel's edge, as bound (the footer's room is the loop's keys')
        assert "k skip its task · w stop worker" in str(monitor.query_one(WorkersPanel).border_subtitle)
        assert "t" in footer(monitor) and "k" not in footer(monitor)
        quit_key = next(k for k in monitor.screen.query("FooterKey") if getattr(k, "key", "") == "q")
        assert quit_key.region.right <= SMALL[0]


async def test_a_wide_journal_wraps_every_long_message_under_itself(tmp_path: Path) -> None:
    """At 200 columns the journal is wider than a headless console (80): a line left to measure
    itself was cut at 80 and went on under the time."""
    ws = make(tmp_path, "workers")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=(200, 50)):
        await screenshots.settle(monitor)
        lines = [line.text.rstrip() for line in monitor.query_one("#journal-lines").lines]  # type: ignore[attr-defined]
        assert any("Task 5 queued to merge (loopdeck/" in line for line in lines), lines
        assert all(line[2:3] == ":" or line.startswith(" " * 30) for line in lines if line), lines


@pytest.mark.parametrize("size", [SMALL, (120, 40)], ids=["80x24", "120x40"])
async def test_verification_rows_name_the_command_not_its_path(tmp_path: Path, size: tuple[int, int]) -> None:
    ws = make(tmp_path, "running")
    command = "/tmp/loopdeck-demo-x1/project/.venv/bin/python /tmp/loopdeck-demo-x1/project/check.py -q"
    Journal(ws.journal).append(
        "verification-passed", 12, {"command": command, "exit_code": 0, "duration_s": 1.5, "tail": "ok"}
    )
    monitor = app(ws, git=False)
    async with monitor.run_test(size=size):
        await screenshots.settle(monitor)
        shown = screen_text(monitor)
        assert "python check.py -q" in shown
        assert "/tmp/" not in shown


def test_a_command_is_named_by_its_program_and_arguments() -> None:
    assert command_label("/opt/x/.venv/bin/python /opt/x/check.py --fast") == "python check.py --fast"
    assert command_label("pytest -q tests/test_api.py") == "pytest -q tests/test_api.py"
    assert command_label("npm run 'test all'") == "npm run 'test all'"
    assert command_label("sh -c 'unterminated") == "sh -c 'unterminated"  # not shell words: as written
    assert command_label("~/bin/check") == "check"


def test_the_sources_table_wraps_rather_than_cuts() -> None:
    from tui.widgets.sources import HEADER, Row

    long = "a reason far longer than the panel is wide, said in full nonetheless"
    rows = (
        HEADER,
        Row(
            (("GitHub project", "off"), ("-", ""), ("-", ""), ("-", "")), (f"off: {long}", "off"), spans=True
        ),
        Row((("Task file", ""), ("2", ""), ("1", ""), ("2", "")), ("TODO.md", "off")),
        Row((), ("[ ] 8: " + "a title with many words " * 3, "item"), hang=7),
    )
    for width in (42, 60, 100):  # the panel is 46 wide at 80 columns
        text = table_text(rows, width, {})
        lines = text.plain.splitlines()
        assert all(len(line) <= width for line in lines), (width, lines)
        assert long in " ".join(" ".join(lines).split())
        assert "a title with many words a title with many words" in " ".join(" ".join(lines).split())
        assert "…" not in text.plain


# --- prompts that fit ------------------------------------------------------------------------------


def fits(monitor: LoopdeckApp, size: tuple[int, int]) -> None:
    """The prompt in front fits the terminal and every one of its buttons is on screen."""
    screen = monitor.screen
    box = screen.query_one(Vertical)
    area = Region(0, 0, *size)
    assert area.contains_region(box.region), (type(screen).__name__, box.region)
    for button in screen.query(Button):
        assert button.region.width > 0 and box.region.contains_region(button.region), (
            type(screen).__name__,
            str(button.label),
            button.region,
        )
        assert str(button.label).strip() in screen_text(monitor)


@pytest.mark.parametrize("size", [SMALL, (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("scenario", ["escalation", "resume", "unconfirmed"])
async def test_every_prompt_fits_with_every_button_visible(
    tmp_path: Path, scenario: str, size: tuple[int, int]
) -> None:
    ws = make(tmp_path, scenario)
    monitor = app(ws, git=True)
    async with monitor.run_test(size=size):
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, EscalationScreen | ResumeScreen | ConfirmScreen)
        fits(monitor, size)


async def test_the_other_prompts_fit_80x24(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    long = "Which of the three storage layers should the list endpoint read from? " * 6
    async with monitor.run_test(size=SMALL) as pilot:
        await screenshots.settle(monitor)
        for prompt in (
            ConfirmScreen("Force completion? 3 tasks remain", "The loop is archived as complete.\n" * 20),
            QuestionScreen(long),
            NumberScreen("Max iterations (now 50)", 50),
            NoteScreen(),
            EscalationScreen("max-iterations: " + long, "iteration 51 of 50 · " * 8, 20),
            ResumeScreen("Found in-progress loop. Resume?", tuple(f"?? file{n}.py" for n in range(40))),
        ):
            monitor.push_screen(prompt)
            await pilot.pause()
            await screenshots.steady(monitor)
            fits(monitor, SMALL)
            monitor.pop_screen()
            await pilot.pause()


# --- escape, the footer ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["l", "o"])
async def test_escape_leaves_full_screen_and_the_footer_says_so(tmp_path: Path, key: str) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL) as pilot:
        await screenshots.settle(monitor)
        assert "escape" not in footer(monitor)  # nothing to go back from
        await pilot.press(key)
        screen = monitor.screen
        assert screen.maximized is not None
        assert footer(monitor).get("escape") == "Back"
        last = lambda: list(monitor.screen.query("FooterKey"))[-1]  # noqa: E731
        await until(pilot, lambda: last().region.width > 0 and last().region.right <= SMALL[0])
        assert list(footer(monitor).values())[-3:] == ["Back", "Help", "Quit"]  # whole on 80 columns
        await pilot.press("escape")
        await until(pilot, lambda: screen.maximized is None)
        assert "escape" not in footer(monitor)


async def test_escape_closes_the_help_and_a_verifications_output(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("question_mark")
        assert isinstance(monitor.screen, TextScreen)
        await until(pilot, lambda: footer(monitor).get("escape") == "Close")
        await pilot.press("escape")
        assert isinstance(monitor.screen, MainScreen)


async def test_the_footer_never_goes_blank_while_searching(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("slash")
        journal = monitor.query_one(JournalPanel)
        assert journal.has_class("-searching")
        keys = footer(monitor)
        assert keys.get("escape") == "Clear search" and keys.get("enter") == "Keep filter", keys
        await pilot.press("c", "o", "m", "m", "i", "t")
        assert journal.query_text == "commit"
        await pilot.press("enter")  # the filter stays, the keys come back
        keys = footer(monitor)
        assert keys.get("p") == "Pause" and keys.get("escape") == "Back", keys
        assert "/commit" in str(journal.border_subtitle)
        await pilot.press("escape")
        assert journal.query_text == "" and not journal.has_class("-searching")
        assert "escape" not in footer(monitor)


async def test_escape_in_a_search_of_the_full_screen_output_clears_it_then_leaves(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("o", "slash", "x")
        output = monitor.query_one(OutputPanel)
        assert output.query_text == "x"
        await pilot.press("escape")
        assert output.query_text == "" and monitor.screen.maximized is output
        await pilot.press("escape")
        assert monitor.screen.maximized is None


async def test_a_notice_hides_no_log(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL, notifications=True) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("p")  # "pause sent to the runner"
        await until(pilot, lambda: bool(monitor.screen.query("Toast")))
        await pilot.pause()
        logs = [monitor.query_one(JournalPanel).region, monitor.query_one(OutputPanel).region]
        for toast in monitor.screen.query("Toast"):
            assert not any(toast.region.overlaps(log) for log in logs), toast.region


# --- the finished screen ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [SMALL, (120, 40)], ids=["80x24", "120x40"])
async def test_the_finished_screen_names_the_tasks_and_how_to_start_again(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    ws = make(tmp_path, "completed")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=size):
        await screenshots.settle(monitor)
        facts = " ".join(text_of(monitor, "#iteration-facts").split())
        assert "done (5): Sketch the data model, Add the storage layer, Expose the list endpoint" in facts
        assert "Validate input" in facts and "left (0): none" in facts
        assert "21 commits" in facts and "$4.87" in facts and "21 iterations in 21m 54s" in facts
        assert "/orchestrator-loop" in facts and 'loopdeck run "what to do"' in facts
        shown = screen_text(monitor)
        assert "loopdeck start" not in shown
        facts_widget = monitor.query_one("#iteration-facts")
        assert facts_widget.region.bottom <= monitor.query_one("#panels").region.bottom  # none of it cut


async def test_the_demos_finished_screen_fits_80x24_whole(tmp_path: Path) -> None:
    """The engine's summary of a completed loop (as `loopdeck demo` leaves it): eight tasks by
    name, no commits listed, no cost: all of it on screen, the panel's border included."""
    import json

    ws = make(tmp_path, "completed")
    summary = next((ws.root / ".claude" / "loops").glob("*/summary.json"))
    record = json.loads(summary.read_text())
    record.pop("commits")
    record["usage"] = {}
    record["reason"] = "all sources empty and verified"
    record["tasks"] = {
        "done": list(DEMO_TASKS),
        "skipped": [],
        "remaining": [],
    }
    summary.write_text(json.dumps(record))
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL):
        await screenshots.settle(monitor)
        panel = monitor.query_one("#iteration")
        facts = " ".join(text_of(monitor, "#iteration-facts").split())
        assert "Add a smoke test" in facts and "21 commits" in facts and "no cost reported" in facts
        assert panel.region.bottom <= monitor.query_one("#panels").region.bottom
        assert panel.max_scroll_y == 0, "the summary scrolls at 80x24"
        assert monitor.query_one(JournalPanel).region.height >= 5


def test_a_summary_without_names_says_so_and_long_lists_are_counted() -> None:
    from loop.views.snapshot import Snapshot

    snapshot = Snapshot(workspace="/w", loop=None)
    many = {"outcome": "stopped", "tasks": {"done": [f"task {n}" for n in range(20)], "remaining": ["last"]}}
    text = finished_text(many, snapshot, 60)
    assert "done (20): task 0, task 1" in " ".join(text.split()) and "… 12 more" in text
    assert "left (1): last" in text
    bare = finished_text({"outcome": "failed", "pending_at_end": 3}, snapshot, 60)
    assert "left: 3 task(s)" in bare and "0 commits" in bare and "no cost reported" in bare
    assert "tasks: not recorded" in finished_text({"outcome": "failed"}, snapshot, 60)


def test_a_summary_without_its_commits_counts_them_in_the_journal() -> None:
    """A completed loop's summary (the engine's) lists no commits: the journal has them."""
    from loop.store.journal import Event
    from loop.views.snapshot import Snapshot

    def at(kind: str) -> Event:
        return Event("2026-01-09T11:00:00Z", kind, 1, {})

    old = [at("loop-started"), at("commit"), at("commit")]
    events = (*old, at("loop-started"), at("commit"), at("iteration-completed"), at("commit"), at("commit"))
    since_start = Snapshot(workspace="/w", loop=None, events=events)
    assert "3 commits" in finished_text({"outcome": "completed"}, since_start, 80)
    tail_only = Snapshot(workspace="/w", loop=None, events=events[4:])
    assert "3+ commits" in finished_text({"outcome": "completed"}, tail_only, 80)
    assert "1 commit " in finished_text({"outcome": "completed", "commits": ["abc"]}, tail_only, 80)
    # A loop of workers lands each task with a merge on its branch: those are its commits.
    workers = (at("loop-started"), at("worker-turn"), at("task-merged"), at("task-merged"), at("completed"))
    merged = Snapshot(workspace="/w", loop=None, events=workers)
    assert "2 commits" in finished_text({"outcome": "completed"}, merged, 80)


# --- one registry, every screen ---------------------------------------------------------------------------


def holders() -> list[tuple[type[Any], tuple[str, ...]]]:
    """Every class that holds keys, and the registry's scopes it takes them from."""
    from tui.monitor import MonitorApp
    from tui.screens.fleet import FleetTable
    from tui.screens.progress import ProgressScreen
    from tui.screens.undo import UndoScreen
    from tui.widgets.search import SearchInput
    from tui.widgets.workers import WorkersPanel

    return [
        (MainScreen, ("app", "main", "monitor")),
        (WorkersPanel, ("workers",)),
        (SearchInput, ("search",)),
        (EscalationScreen, ("escalation",)),
        (ConfirmScreen, ("confirm",)),
        (UndoScreen, ("undo",)),
        (ResumeScreen, ("resume",)),
        (NumberScreen, ("number",)),
        (NoteScreen, ("note",)),
        (QuestionScreen, ("question",)),
        (TextScreen, ("text",)),
        (ProgressScreen, ("progress",)),
        (FleetTable, ("fleet",)),
        (FleetScreen, ("fleet",)),
        (NeighbourScreen, ("neighbour",)),
        (MonitorApp, ()),
        (LoopdeckApp, ()),
    ]


def test_every_key_of_every_screen_and_widget_is_in_the_registry() -> None:
    from textual.binding import Binding

    registered = {(k.id, k.action) for k in actions.KEYS}
    used_scopes: set[str] = set()
    for holder, scopes in holders():
        own = [b for b in holder.__dict__.get("BINDINGS", []) if isinstance(b, Binding)]
        for binding in own:
            assert binding.id is not None and (binding.id, binding.action) in registered, (holder, binding)
            assert any(
                (k.id, k.action) == (binding.id, binding.action) and k.scope in scopes for k in actions.KEYS
            ), (holder, binding)
        used_scopes |= set(scopes)
    assert used_scopes == set(actions.SCOPES)
    for key in actions.KEYS:  # one id, one default key, wherever it appears
        assert actions.DEFAULTS[key.id] == key.key, key
    help_text = actions.help_plain({})
    for key_id in actions.IDS:
        assert f" · {key_id}" in help_text


def test_the_docs_name_every_id_a_keymap_may_rebind() -> None:
    """The monitor page's list of ids is what a person writes a keymap from: none of them missing."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "monitor.md").read_text()
    assert [i for i in sorted(actions.IDS) if f"`{i}`" not in page] == []


def test_a_keymap_may_name_every_id_and_is_told_of_the_unknown(tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text(
        '[keys]\n"view.fleet" = "g"\n"loop.next" = "N"\n"worker.skip" = "j"\n"app.back" = "h"\n'
    )
    loaded, problem = actions.load_keymap(keymap)
    assert loaded == {"view.fleet": "g", "loop.next": "N", "worker.skip": "j", "app.back": "h"}
    assert problem is None
    keymap.write_text('[keys]\n"loop.pause" = "z"\n"view.nowhere" = "y"\n"loop.skip" = 3\n')
    loaded, problem = actions.load_keymap(keymap)
    assert loaded == {"loop.pause": "z"}
    assert problem is not None and "view.nowhere" in problem and "loop.skip" in problem
    keymap.write_text('keys = "p"\n')
    loaded, problem = actions.load_keymap(keymap)
    assert loaded == {} and problem is not None


def rebound() -> dict[str, str]:
    """A keymap moving every id to a key of its own."""
    return {key_id: f"f{n}" for n, key_id in enumerate(sorted(actions.IDS), start=1)}


def active_ids(screen: Screen[Any]) -> dict[str, str]:
    """Binding id → key, as the screen in front answers keys now."""
    return {b.binding.id: key for key, b in screen.active_bindings.items() if b.binding.id}


async def test_a_keymap_rebinds_the_keys_of_every_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keymap = rebound()
    path = tmp_path / "keymap.toml"
    path.write_text("[keys]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in keymap.items()))
    monkeypatch.setenv("LOOPDECK_KEYMAP", str(path))

    def check(screen: Screen[Any], scopes: tuple[str, ...]) -> None:
        wanted = {k.id for k in actions.KEYS if k.scope in scopes}
        ids = active_ids(screen)
        for key_id in wanted & set(ids):
            assert ids[key_id] == keymap[key_id], (type(screen).__name__, key_id, ids)
        return None

    ws = make(tmp_path, "workers")
    monitor = app(ws, git=False, prompts=False)
    async with monitor.run_test(size=(120, 40)) as pilot:
        await screenshots.settle(monitor)
        assert monitor.keymap == keymap
        ids = active_ids(monitor.screen)
        for key_id in ("loop.pause", "view.output", "worker.skip", "worker.stop", "app.help", "app.quit"):
            assert ids.get(key_id) == keymap[key_id], (key_id, ids)
        await pilot.press(keymap["worker.skip"])  # the selected worker's task
        await until(pilot, lambda: bool(commands(ws)))
        assert [(c["kind"], c.get("target")) for c in commands(ws)] == [("skip", "worker-3")]
        for prompt, scopes in (
            (EscalationScreen("why", "numbers", 20), ("escalation",)),
            (ConfirmScreen("Sure?"), ("confirm",)),
            (ResumeScreen("Resume?", ("?? a.py",)), ("resume",)),
            (NumberScreen("Max", 5), ("number",)),
            (NoteScreen(), ("note",)),
            (QuestionScreen("why?"), ("question",)),
            (TextScreen("Help", "body"), ("text",)),
        ):
            monitor.push_screen(prompt)
            await pilot.pause()
            check(monitor.screen, scopes)
            if isinstance(prompt, EscalationScreen):
                assert f"Pause \\[{keymap['loop.pause']}]" in str(
                    monitor.screen.query_one("#pause", Button).label
                ) or (f"[{keymap['loop.pause']}]" in str(monitor.screen.query_one("#pause", Button).label))
            await pilot.press(keymap["app.back"])
            await until(pilot, lambda: isinstance(monitor.screen, MainScreen))
        await pilot.press(keymap["app.help"])
        assert isinstance(monitor.screen, TextScreen)
        assert f"{keymap['worker.skip']} · skip the worker's task" in monitor.screen.body  # keys as bound


async def test_a_keymap_rebinds_the_fleet_and_the_neighbour_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text('[keys]\n"view.fleet" = "g"\n"loop.next" = "N"\n"fleet.open" = "o"\n"app.back" = "h"\n')
    monkeypatch.setenv("LOOPDECK_KEYMAP", str(path))
    ws = make(tmp_path, "fleet")
    monitor = app(ws, git=False, prompts=False)
    async with monitor.run_test(size=(120, 40)) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, FleetScreen)
        assert active_ids(monitor.screen).get("fleet.open") == "o"
        await pilot.press("o")  # opens the first loop
        await until(pilot, lambda: not isinstance(monitor.screen, FleetScreen))
        if isinstance(monitor.screen, NeighbourScreen):
            assert active_ids(monitor.screen).get("loop.next") == "N"
            await pilot.press("h")
            await until(pilot, lambda: isinstance(monitor.screen, FleetScreen))
        else:
            assert active_ids(monitor.screen).get("view.fleet") == "g"
            await pilot.press("g")
            await until(pilot, lambda: isinstance(monitor.screen, FleetScreen))


async def test_the_palette_offers_the_keys_of_the_screen_in_front(tmp_path: Path) -> None:
    ws = make(tmp_path, "workers")
    monitor = app(ws, git=False, prompts=False)
    async with monitor.run_test(size=(120, 40)) as pilot:
        await screenshots.settle(monitor)
        titles = {c.title for c in monitor.get_system_commands(monitor.screen)}
        assert {"Pause the loop", "Agent output full screen", "Skip the worker's task"} <= titles
        assert "Resume the loop" not in titles  # it does not apply now
        monitor.push_screen(EscalationScreen("why", "numbers", 20))
        await pilot.pause()
        titles = {c.title for c in monitor.get_system_commands(monitor.screen)}
        assert {"Continue", "Skip the task", "Later"} <= titles


async def test_the_help_lists_every_screens_keys(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SMALL) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("question_mark")
        assert isinstance(monitor.screen, TextScreen)
        body = monitor.screen.body
        for heading in actions.SCOPES.values():
            assert heading in body
        for needle in ("k · skip the worker's task", "n · next loop in this folder", "f · the fleet"):
            assert needle in body

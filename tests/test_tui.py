"""The monitor, driven as a person would: keys pressed with pilot, asserted on the widgets and
on the files (the control queue); snapshots for the screenshots' situations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import RichLog, Static

from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO
from tools import screenshots
from tui.app import LoopdeckApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.escalation import EscalationScreen
from tui.screens.number import NumberScreen
from tui.screens.resume import ResumeScreen
from tui.screens.text import QuestionScreen, TextScreen
from tui.widgets.iteration import IterationPanel
from tui.widgets.journal import JournalPanel
from tui.widgets.sources import SourcesPanel
from tui.widgets.status_bar import StatusBar

SIZE = screenshots.SIZE


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)


def commands(ws: Workspace) -> list[dict[str, Any]]:
    if not ws.control.exists():
        return []
    return [json.loads(line) for line in ws.control.read_text().splitlines()]


def text_of(app: LoopdeckApp, selector: str) -> str:
    widget = app.query_one(selector)
    assert isinstance(widget, Static)
    return str(widget.render())


def journal_text(app: LoopdeckApp) -> str:
    """The journal panel's lines as the screen has them."""
    log = app.query_one("#journal-lines", RichLog)
    return "\n".join(line.text for line in log.lines)


async def until(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if check():
            return
    raise AssertionError("the screen never showed it")


async def until_seen(pilot: Pilot[None], act: Callable[[], object], check: Callable[[], bool]) -> None:
    """Do `act` until `check` holds (bounded): the file watcher starts in the background, and a
    change made before it is up is never reported, so the change is made again until seen."""
    for _ in range(20):
        act()
        try:
            await until(pilot, check, timeout=0.5)
            return
        except AssertionError:
            continue
    raise AssertionError("the screen never showed it")


def make(tmp_path: Path, name: str) -> Workspace:
    return screenshots.SCENARIOS[name](tmp_path / name)


def app(ws: Workspace, **kw: Any) -> LoopdeckApp:
    made = screenshots.app_for(ws, **kw)
    assert isinstance(made, LoopdeckApp)
    return made


# --- keys --------------------------------------------------------------------------------------


async def test_steering_keys_send_commands(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    before = (ws.state.read_bytes(), ws.state.stat().st_mtime_ns, ws.backup.exists())
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert "RUNNING" in text_of(monitor, "#status-bar")
        assert monitor.check_action("pause", ()) and not monitor.check_action("resume", ())
        await pilot.press("p")
        await screenshots.settle(monitor)
        # A queued pause: the bar says so (never RUNNING), and `p` is off until it lands.
        bar = text_of(monitor, "#status-bar")
        assert "PAUSING" in bar and "pause pending" in bar and "RUNNING" not in bar
        assert monitor.check_action("pause", ()) is None
        assert monitor.disabled_reason("pause") == "a pause is pending"
        await pilot.press("s")
        await pilot.press("c")
        assert isinstance(monitor.screen, ConfirmScreen)
        assert monitor.screen.question == "Force completion? 3 tasks remain"
        await pilot.press("n")
        await pilot.press("m")
        assert isinstance(monitor.screen, NumberScreen)
        await pilot.press("end", "backspace", "backspace", "backspace", "8", "0", "enter")
        await pilot.pause()
        await pilot.press("x")
        assert isinstance(monitor.screen, ConfirmScreen)
        await pilot.press("y")
        await screenshots.settle(monitor)
        # A queued stop: every other steering key is off, with the reason.
        assert monitor.disabled_reason("complete") == "a stop is pending"
        await pilot.press("c")
        assert not isinstance(monitor.screen, ConfirmScreen)
    sent = commands(ws)
    assert [c["kind"] for c in sent] == ["pause", "skip", "set-max-iterations", "stop"]
    assert all(c["source"] == "tui" for c in sent)
    assert sent[2]["value"] == 80
    # The monitor never writes the state: same bytes, same time, no backup made.
    assert (ws.state.read_bytes(), ws.state.stat().st_mtime_ns, ws.backup.exists()) == before
    kinds = [e.kind for e in Journal(ws.journal).tail(20).events]
    assert kinds.count("command-sent") == 4


async def test_footer_shows_only_what_applies(tmp_path: Path) -> None:
    ws = make(tmp_path, "escalation")
    monitor = app(ws, git=False, prompts=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert not monitor.check_action("pause", ()) and monitor.check_action("resume", ())
        await pilot.press("p")  # paused: pause does not apply, nothing is sent
        await pilot.press("r")
    assert [c["kind"] for c in commands(ws)] == ["resume"]


async def test_applied_command_is_reported(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE, notifications=True) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("p")
        (sent,) = commands(ws)
        assert monitor.awaiting == {sent["id"]: "pause"}
        Journal(ws.journal).append(
            "command-applied", 12, {"id": sent["id"], "command": "pause", "outcome": "paused"}
        )
        monitor.load_snapshot()
        await until(pilot, lambda: not monitor.awaiting)
        assert any("pause applied: paused" in str(n.message) for n in monitor._notifications)


async def test_hook_driven_loop_says_it_waits_for_the_next_stop(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    state = StateStore(ws).read()
    assert state is not None
    state.driver, state.pid = "hook", None
    StateStore(ws).write(state)
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE, notifications=True) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("p")
        await pilot.pause()
        assert any("turn ends" in str(n.message) for n in monitor._notifications)


async def test_help_journal_and_search(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("question_mark")
        assert isinstance(monitor.screen, TextScreen)
        await pilot.press("escape")
        await pilot.press("l")
        assert monitor.screen.maximized is monitor.query_one(JournalPanel)
        await pilot.press("l")
        assert monitor.screen.maximized is None
        await pilot.press("slash")
        await pilot.press(*"FAILED")
        journal = monitor.query_one(JournalPanel)
        assert journal.query_text == "FAILED"
        shown = journal_text(monitor)
        assert "Verification FAILED" in shown and "Starting iteration" not in shown
        await pilot.press("enter", "escape")
        assert journal.query_text == ""


async def test_verification_output_on_enter(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        monitor.query_one("#verification-table").focus()
        await pilot.press("enter")
        assert isinstance(monitor.screen, TextScreen)
        assert "12 passed" in monitor.screen.body


async def test_command_palette_holds_the_actions(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE):
        await screenshots.settle(monitor)
        titles = {c.title for c in monitor.get_system_commands(monitor.screen)}
    assert {
        "Pause the loop",
        "Skip the current task",
        "Force completion",
        "Stop the loop",
        "Set max iterations",
        "Journal full screen",
        "Help",
        "Quit the monitor",
        "Theme",
    } <= titles
    assert "Resume the loop" not in titles
    assert not titles & {"Quit", "Keys", "Maximize"}  # Textual's, that the monitor's keys repeat


# --- modals --------------------------------------------------------------------------------------


async def test_escalation_modal_continue_raises_the_limit_and_resumes(tmp_path: Path) -> None:
    ws = make(tmp_path, "escalation")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, EscalationScreen)
        assert "50 iterations reached with 3 task(s) pending" in monitor.screen.reason
        assert "iteration 51 of 50" in monitor.screen.numbers
        assert "ESCALATED" in text_of(monitor, "#status-bar")
        await pilot.press("r")  # r resumes, as on the main screen
    sent = commands(ws)
    assert [(c["kind"], c.get("value")) for c in sent] == [("set-max-iterations", 71), ("resume", None)]


@pytest.mark.parametrize(("key", "expected"), [("p", []), ("s", ["skip", "resume"]), ("c", ["complete"])])
async def test_escalation_modal_other_choices(tmp_path: Path, key: str, expected: list[str]) -> None:
    ws = make(tmp_path, "escalation")
    state = StateStore(ws).read()
    assert state is not None
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await until(pilot, lambda: isinstance(monitor.screen, EscalationScreen))  # a loaded machine is slow
        await pilot.press(key)
        await until(pilot, lambda: not isinstance(monitor.screen, EscalationScreen))
    assert [c["kind"] for c in commands(ws)] == (expected if key != "p" else [])  # already paused


async def test_resume_prompt_for_a_paused_hook_loop(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    state = StateStore(ws).read()
    assert state is not None
    state.driver, state.pid, state.status = "hook", None, "paused"
    StateStore(ws).write(state)
    monitor = app(ws)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ResumeScreen)
        assert monitor.screen.question == "Found paused loop. Resume from iteration 12/50? [Y/n]"
        assert monitor.screen.changes == ("?? api.py", "?? notes.md")
        await pilot.press("y")
    assert [c["kind"] for c in commands(ws)] == ["resume"]


async def test_resume_prompt_no_pauses_a_dead_runners_loop(tmp_path: Path) -> None:
    ws = make(tmp_path, "resume")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ResumeScreen)
        assert monitor.screen.question == "Found in-progress loop (iteration 12/100). Resume? [Y/n]"
        await pilot.press("n")
    assert [c["kind"] for c in commands(ws)] == ["pause"]


async def test_corrupt_state_panel_and_restore(tmp_path: Path) -> None:
    ws = make(tmp_path, "corrupt")
    broken = ws.state.read_bytes()
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = text_of(monitor, "#error-panel")
        assert "file: .claude/orchestrator-loop.local.md" in panel and "line: 2" in panel
        assert "expected a whole number >= 0, got the string 'thirteen'" in panel
        assert monitor.check_action("restore_backup", ()) and not monitor.check_action("pause", ())
        assert ws.state.read_bytes() == broken
        await pilot.press("b")
        await until(pilot, lambda: "RUNNING" in text_of(monitor, "#status-bar"))
    restored = StateStore(ws).read()
    assert restored is not None and restored.iteration == 12
    assert next(ws.claude_dir.glob("*.corrupt-*")).read_bytes() == broken


async def test_a_corrupt_state_without_a_backup_says_how_to_mend_it_and_fits_80x24(tmp_path: Path) -> None:
    from tui.widgets.journal import JournalPanel

    ws = make(tmp_path, "corrupt")
    ws.backup.unlink(missing_ok=True)
    monitor = app(ws, git=False)
    async with monitor.run_test(size=(80, 24)) as pilot:
        await screenshots.settle(monitor)
        assert "`loopdeck resume` rebuilds the state from the journal" in text_of(monitor, "#error-panel")
        assert not monitor.check_action("restore_backup", ())
        journal = monitor.screen.query_one(JournalPanel).region
        assert journal.y <= 20  # its title and lines on screen, above the footer
        await pilot.pause()


async def test_question_modal_sends_the_answer(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    Journal(ws.journal).append("question", 12, {"question": "SQLite or files?"})
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, QuestionScreen)
        await pilot.press(*"SQLite", "enter")
    (sent,) = commands(ws)
    assert sent["kind"] == "answer" and sent["reason"] == "SQLite" and "target" not in sent


async def test_a_workers_question_is_answered_to_that_worker(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    Journal(ws.journal).append(
        "question", 12, {"question": "Keep the format?", "worker": "worker-2", "task": "4"}
    )
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, QuestionScreen)
        await pilot.press(*"yes", "enter")
    (sent,) = commands(ws)
    assert sent["kind"] == "answer" and sent["reason"] == "yes" and sent["target"] == "worker-2"


async def test_no_loop_and_completed(tmp_path: Path) -> None:
    empty = Workspace(tmp_path / "empty")
    empty.root.mkdir()
    monitor = app(empty, git=False)
    async with monitor.run_test(size=SIZE):
        await screenshots.settle(monitor)
        assert "no loop" in text_of(monitor, "#status-bar")
        assert not monitor.check_action("pause", ())
    done = make(tmp_path, "completed")
    monitor = app(done, git=False)
    async with monitor.run_test(size=SIZE):
        await screenshots.settle(monitor)
        assert "COMPLETED after 21 iterations" in text_of(monitor, "#status-bar")


# --- live ------------------------------------------------------------------------------------


async def test_editing_the_task_file_reaches_the_panel(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, watch=True, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await until(pilot, lambda: monitor.watched is not None)
        panel = monitor.query_one(SourcesPanel)
        assert "3 open" in str(panel.border_subtitle)
        todo = ws.root / "TODO.md"
        done = todo.read_text().replace("- [ ] Validate input", "- [x] Validate input")
        await until_seen(pilot, lambda: todo.write_text(done), lambda: "2 open" in str(panel.border_subtitle))
        Journal(ws.journal).append("warning", 12, {"message": "live journal line"})
        await until(pilot, lambda: "live journal line" in journal_text(monitor))


async def test_real_runner_pause_and_resume(tmp_path: Path) -> None:
    from loop.demo import workspace

    root = workspace.create(tmp_path / "demo", tasks=30)
    ws = Workspace(root)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loop.cli",
            "-C",
            str(root),
            "run",
            "Build it",
            "--task-file",
            "TODO.md",
            "--agent",
            workspace.agent_command("--sleep", "0.2", "0.2"),
            "--no-github",
            "--no-tasks",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not ws.state.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        monitor = LoopdeckApp(ws, git=False, prompts=False)
        async with monitor.run_test(size=SIZE) as pilot:
            bar = monitor.query_one(StatusBar)
            await until(
                pilot,
                lambda: (
                    "RUNNING" in str(bar.render())
                    and monitor.snapshot is not None
                    and monitor.snapshot.loop is not None
                    and monitor.snapshot.loop.iteration >= 2
                ),
                30,
            )
            await pilot.press("p")
            await until(pilot, lambda: "PAUSED" in str(bar.render()), 30)
            assert monitor.snapshot is not None and monitor.snapshot.loop is not None
            held = monitor.snapshot.loop.iteration
            await pilot.pause(1.0)
            assert monitor.snapshot.loop.iteration == held
            await pilot.press("r")
            await until(
                pilot,
                lambda: (
                    monitor.snapshot is not None
                    and monitor.snapshot.loop is not None
                    and monitor.snapshot.loop.iteration > held
                ),
                30,
            )
            await pilot.press("q")
        assert runner.poll() is None  # quitting the monitor never stops the loop
    finally:
        runner.terminate()
        runner.wait(30)


# --- snapshots --------------------------------------------------------------------------------


def _settled() -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        await screenshots.settle(pilot.app)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("name", list(screenshots.SCENARIOS))
def test_snapshot(snap_compare: Any, tmp_path: Path, name: str) -> None:
    ws = make(tmp_path, name)
    assert snap_compare(screenshots.app_for(ws), terminal_size=SIZE, run_before=_settled())


async def test_snapshots_keep_arriving_under_a_modal(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("question_mark")
        assert isinstance(monitor.screen, TextScreen)
        shown = monitor.snapshots_shown
        monitor.load_snapshot()
        monitor.main.query_one(IterationPanel)._tick()
        await until(pilot, lambda: monitor.snapshots_shown > shown)
        assert isinstance(monitor.screen, TextScreen)  # and nothing crashed


async def test_monitor_started_inside_a_runner_workspace_sees_task_file_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner loop has no transcript: the todos source says so in words, and the watcher must
    not read a path out of those words (it read `.`, the workspace itself when the monitor
    starts there, and then no TODO.md edit ever reached the screen)."""
    ws = make(tmp_path, "running")
    monkeypatch.chdir(ws.root)
    monitor = app(Workspace(Path.cwd()), watch=True, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await until(pilot, lambda: monitor.watched is not None)
        assert monitor.snapshot is not None and monitor.snapshot.sources is not None
        todos_report = next(r for r in monitor.snapshot.sources.sources if r.name == "todos")
        assert getattr(todos_report, "path", None) is None and "no transcript" in (todos_report.detail or "")
        folders, files = monitor.watched or ((), ())
        assert all(p.is_absolute() for p in [*folders, *files]), (folders, files)
        panel = monitor.query_one(SourcesPanel)
        assert "3 open" in str(panel.border_subtitle)
        todo = ws.root / "TODO.md"
        done = todo.read_text().replace("- [ ] Validate input", "- [x] Validate input")
        await until_seen(pilot, lambda: todo.write_text(done), lambda: "2 open" in str(panel.border_subtitle))


def test_watch_paths_come_from_the_reports_paths(tmp_path: Path) -> None:
    from loop.views.snapshot import read
    from tui.watch import watch_paths

    ws = make(tmp_path, "running")
    snapshot = read(ws)
    folders, files = watch_paths(ws, snapshot)
    assert (ws.root / "TODO.md").resolve() in {f.resolve() for f in files}
    assert all(p.is_absolute() for p in [*folders, *files])
    assert not any("no transcript" in str(p) for p in files)


def live_widgets() -> int:
    """Widgets still in memory, on screen or not (a leak keeps them alive off screen)."""
    import gc

    from textual.widget import Widget

    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Widget))


async def test_snapshots_that_change_no_key_neither_refresh_the_footer_nor_grow_the_screen(
    tmp_path: Path,
) -> None:
    """A refresh recomposes the footer: one per snapshot leaked its key widgets (1,090 → 4,209
    live widgets over 240 snapshots). Only a change in what applies refreshes it."""
    import dataclasses

    from loop.views.snapshot import read
    from tui.watch import SnapshotReady

    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await pilot.pause()
        refreshed: list[int] = []
        real_refresh = monitor.refresh_bindings

        def spy() -> None:
            refreshed.append(monitor.snapshots_shown)
            real_refresh()

        monitor.refresh_bindings = spy  # type: ignore[method-assign]
        snapshot = read(ws)
        assert snapshot.loop is not None
        widgets = len(list(monitor.screen.walk_children()))
        alive = live_widgets()
        for n in range(40):
            Journal(ws.journal).append("iteration-started", 13 + n, {"max_iterations": 50})
            monitor.post_message(SnapshotReady(read(ws)))
            await pilot.pause()
        await pilot.pause()
        assert monitor.snapshots_shown >= 40
        assert len(list(monitor.screen.walk_children())) == widgets
        assert live_widgets() <= alive + 5, (alive, live_widgets())
        assert refreshed == []
        paused = dataclasses.replace(snapshot, loop=dataclasses.replace(snapshot.loop, status="paused"))
        monitor.post_message(SnapshotReady(paused))
        await until(pilot, lambda: len(refreshed) == 1)
        for _ in range(5):
            monitor.post_message(SnapshotReady(paused))
            await pilot.pause()
        assert len(refreshed) == 1
        keys = {b.binding.action for b in monitor.screen.active_bindings.values() if b.enabled}
        assert "app.resume" in keys and "app.pause" not in keys  # the main screen's keys run the app's


async def test_journal_panel_writes_only_new_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each event is formatted and written once; everything again only for a new journal or a
    new search."""
    from loop.views.snapshot import read
    from tui.watch import SnapshotReady
    from tui.widgets import journal as journal_widget

    formatted: list[str] = []
    from loop.store.journal import message as real_message

    def counting(event: Any) -> str:
        formatted.append(event.kind)
        return real_message(event)

    monkeypatch.setattr(journal_widget, "message", counting)
    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(JournalPanel)
        assert len(panel.events) == 45  # 11 iterations (4 events each) and the start
        journal = Journal(ws.journal)
        formatted.clear()
        for n in range(10):
            journal.append("warning", 12, {"message": f"appended {n}"})
            monitor.post_message(SnapshotReady(read(ws)))
            await until(pilot, lambda: f"appended {n}" in journal_text(monitor))  # noqa: B023
        assert formatted == ["warning"] * 10
        assert panel.border_subtitle == "55 of 55"
        # Past the window's size: old events leave it, new ones are still only written once.
        formatted.clear()
        for n in range(300):
            journal.append("iteration-started", 13 + n, {"max_iterations": 400})
        journal.append("warning", 12, {"message": "after many"})
        monitor.post_message(SnapshotReady(read(ws)))
        await until(pilot, lambda: "after many" in journal_text(monitor))
        assert len(formatted) == 300  # not a continuation: one redraw of the window
        formatted.clear()
        journal.append("warning", 12, {"message": "one more"})
        monitor.post_message(SnapshotReady(read(ws)))
        await until(pilot, lambda: "one more" in journal_text(monitor))
        assert formatted == ["warning"]
        assert panel.border_subtitle == "300 of 300"
        # A new loop replaced the journal: everything again.
        ws.journal.unlink()
        Journal(ws.journal).append("loop-started", 0, {"max_iterations": 5})
        formatted.clear()
        monitor.post_message(SnapshotReady(read(ws)))
        await until(pilot, lambda: "one more" not in journal_text(monitor))
        assert formatted == ["loop-started"]
        assert "Loop started" in journal_text(monitor)
        # A new search: everything again, filtered.
        await pilot.press("slash", *"zzz")
        assert "no events matching 'zzz'" in journal_text(monitor)


async def test_journal_panel_wraps_again_on_a_new_width(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(JournalPanel)
        before = panel.redraws
        await pilot.resize_terminal(SIZE[0] - 40, SIZE[1])
        await until(pilot, lambda: panel.redraws == before + 1)
        widest = max(len(line.rstrip()) for line in journal_text(monitor).splitlines())
        assert widest <= SIZE[0] - 40
        assert "Iteration 11 complete" in journal_text(monitor)


async def test_a_usage_limit_counts_down_the_cost_shows_and_t_sends_a_note(tmp_path: Path) -> None:
    """Left alone overnight: the bar counts down to the limit's reset, the iteration panel
    shows what the agent reported it cost, and `t` puts a note into the next prompt."""
    from datetime import timedelta

    from loop.core.timeutil import iso_s
    from tui.screens.text import NoteScreen

    ws = make(tmp_path, "running")
    text = ws.state.read_text()
    resets = iso_s(screenshots.NOW + timedelta(minutes=4, seconds=12))
    extra = (
        f'waiting_for: {{"kind": "usage-limit", "reason": "limit reached", "since": "", "until": "{resets}"}}\n'
        'usage: {"cost_micro_usd": 1230000, "output_tokens": 4000}\n---\n'
    )
    ws.state.write_text(text.replace("\n---\n", "\n" + extra, 1))
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert "usage limit · resets in 4m 12s" in text_of(monitor, "#status-bar")
        assert "$1.23 (4,000 tokens)" in text_of(monitor, "#iteration-facts")
        await pilot.press("t")
        assert isinstance(monitor.screen, NoteScreen)
        await pilot.press(*"use sqlite", "enter")
        await until(pilot, lambda: any(c["kind"] == "say" for c in commands(ws)))
    (note,) = [c for c in commands(ws) if c["kind"] == "say"]
    assert note["reason"] == "use sqlite"

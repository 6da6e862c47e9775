"""The monitor's second round: the output panel, the action registry and keymap, pending
commands, modals that close when they no longer apply, the finished screen, words, pipes."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import RichLog

from loop.core.model import replace
from loop.store.journal import Journal
from loop.store.state import StateStore
from tests.conftest import REPO, loopdeck_cmd
from tests.test_tui import _settled, app, commands, make, text_of, until
from tools import screenshots
from tui import actions
from tui.app import LoopdeckApp
from tui.screens.escalation import EscalationScreen
from tui.screens.text import TextScreen
from tui.widgets.output import Followed, OutputPanel, OutputRead, render_line

SIZE = screenshots.SIZE


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    monkeypatch.setenv("LOOPDECK_KEYMAP", str(tmp_path / "no-keymap.toml"))
    for key, value in screenshots.GIT_ENV.items():
        monkeypatch.setenv(key, value)


def output_text(monitor: LoopdeckApp) -> str:
    log = monitor.query_one("#output-lines", RichLog)
    return "\n".join(line.text for line in log.lines)


def screen_text(monitor: LoopdeckApp) -> str:
    """What the screen shows, as text."""
    import html

    return html.unescape(monitor.export_screenshot()).replace("\xa0", " ")


# --- the output panel ---------------------------------------------------------------------------


def test_render_line_shows_text_and_tool_calls_and_passes_raw_lines() -> None:
    text = {"type": "assistant", "message": {"content": [{"type": "text", "text": "one\ntwo"}]}}
    tool = {
        "type": "assistant",
        "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls -la"}}]},
    }
    result = {"type": "user", "message": {"content": [{"type": "tool_result", "content": "x"}]}}
    assert [t.plain for t in render_line(json.dumps(text))] == ["one", "two"]
    assert [t.plain for t in render_line(json.dumps(tool))] == ["▸ Bash ls -la"]
    assert render_line(json.dumps(result)) == []
    assert [t.plain for t in render_line("plain agent output\n")] == ["plain agent output"]
    single = {
        "type": "result",
        "subtype": "success",
        "num_turns": 3,
        "total_cost_usd": 0.25,
        "session_id": "s",
    }
    assert [t.plain for t in render_line(json.dumps(single))] == ["■ success · 3 turns · $0.25"]


def test_reader_reads_only_what_was_added_and_skips_ahead_when_far_behind(tmp_path: Path) -> None:
    log = tmp_path / "0001.log"
    log.write_bytes(b"first\nsecond\npart")
    reader = OutputRead(Followed(str(log), "iteration log"))
    assert reader.read() == ["first", "second"]
    with log.open("ab") as out:
        out.write(b"ial\nthird\n")
    assert reader.read() == ["partial", "third"]
    assert reader.read() == []
    with log.open("ab") as out:
        out.write(b"x" * 100 + b"\n" + (b"y" * 99 + b"\n") * 10_000)  # 1 MB at once
    lines = reader.read()
    assert reader.skipped > 0 and lines and set(lines) == {"y" * 99}


def test_the_iterations_log_is_found_without_listing_every_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The output panel looks for the current iteration's log by its name (and its retries'
    names the journal shows), not through a listing of the thousands of logs a long loop has."""
    from loop.store.paths import Workspace
    from loop.views.snapshot import read
    from tui.widgets.output import followed

    ws = make(tmp_path, "running")
    state = StateStore(ws).read()
    assert state is not None
    logs = ws.iteration_logs(state.started_at, state.loop_id)
    for n in range(1, 12):
        (logs / f"{n:04d}.log").write_text("old\n")
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = followed(Workspace(ws.root), read(ws))
    assert found is not None and Path(found.path).name == "0012.log"
    Journal(ws.journal).append("retry", 12, {"in_s": 1, "attempt": 2})
    (logs / "0012.retry1.log").write_text("second attempt\n")
    found = followed(Workspace(ws.root), read(ws))
    assert found is not None and Path(found.path).name == "0012.retry1.log"
    assert str(logs) not in listed
    (logs / "0012.log").unlink()  # not where the journal says: then the folder is listed, once
    (logs / "0012.retry1.log").unlink()
    found = followed(Workspace(ws.root), read(ws))
    assert found is not None and Path(found.path).name == "0011.log"
    assert listed.count(str(logs)) == 1


async def test_output_panel_follows_the_iteration_log_full_screen_and_searchable(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        assert panel.target is not None and Path(panel.target.path).name == "0012.log"
        await until(pilot, lambda: "▸ Read api.py" in output_text(monitor))
        with open(panel.target.path, "a") as out:
            out.write("a raw line from the agent\n")
        await until(pilot, lambda: "a raw line from the agent" in output_text(monitor))
        await pilot.press("o")
        assert monitor.screen.maximized is panel
        await pilot.press("slash", *"Bash")
        await until(pilot, lambda: output_text(monitor).strip() == "▸ Bash pytest -q tests/test_api.py")
        await pilot.press("escape")
        await until(pilot, lambda: "a raw line" in output_text(monitor))
        await pilot.press("o")
        assert monitor.screen.maximized is None


async def test_an_iterations_output_lines_are_drawn_with_its_snapshot(tmp_path: Path) -> None:
    """The lines the agent wrote and the journal lines the runner wrote after them reach their
    panels with the same snapshot (one frame), read where the panel is, not by a thread."""
    from loop.views.snapshot import read

    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        assert panel.target is not None
        await until(pilot, lambda: "▸ Read api.py" in output_text(monitor))
        with open(panel.target.path, "a") as out:
            out.write("the agent's last words\n")
        Journal(ws.journal).append("warning", 12, {"message": "runner-says"})
        monitor.show_snapshot(read(ws))  # no await: nothing else runs in between
        assert "the agent's last words" in output_text(monitor)
        journal = monitor.query_one("#journal-lines", RichLog)
        assert any("runner-says" in line.text for line in journal.lines)
        assert panel.reads_in_thread == 0


async def test_the_output_moves_to_the_next_iterations_log_with_the_snapshot(tmp_path: Path) -> None:
    """A snapshot of the next iteration moves the panel to its log and shows its lines at once
    (in that snapshot's frame), not on a clock of the panel's own."""
    from loop.views.snapshot import read

    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        assert panel.target is not None and Path(panel.target.path).name == "0012.log"
        await until(pilot, lambda: "▸ Read api.py" in output_text(monitor))
        panel.switched_at -= 10  # the last move was long ago
        (Path(panel.target.path).parent / "0013.log").write_text("iteration thirteen speaks\n")
        store = StateStore(ws)
        state = store.read()
        assert state is not None
        store.write(replace(state, iteration=13))
        Journal(ws.journal).append("iteration-started", 13, {})
        monitor.show_snapshot(read(ws))
        assert Path(panel.target.path).name == "0013.log"
        assert output_text(monitor).strip() == "iteration thirteen speaks"


async def test_a_new_log_repaints_the_outputs_subtitle_row_not_its_whole_border(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file's name in the border's bottom row changes with every new iteration: that row is
    repainted, not every row of the panel's border, and the screen shows the new name."""
    from loop.views.snapshot import read

    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        assert panel.target is not None
        await until(pilot, lambda: "▸ Read api.py" in output_text(monitor))
        refreshed: list[tuple[Region, ...]] = []
        real = OutputPanel.refresh

        def refresh(self: OutputPanel, *regions: Region, **kwargs: Any) -> Any:
            if self is panel:
                refreshed.append(regions)
            return real(self, *regions, **kwargs)

        monkeypatch.setattr(OutputPanel, "refresh", refresh)
        panel.switched_at -= 10
        (Path(panel.target.path).parent / "0013.log").write_text("iteration thirteen speaks\n")
        store = StateStore(ws)
        state = store.read()
        assert state is not None
        store.write(replace(state, iteration=13))
        monitor.show_snapshot(read(ws))
        assert Path(panel.target.path).name == "0013.log"
        assert refreshed and all(len(regions) == 1 and regions[0].height == 1 for regions in refreshed)
        await pilot.pause()
        assert "iteration log 0013.log" in screen_text(monitor)


async def test_lines_found_by_the_output_clock_wait_a_moment_for_a_snapshot(tmp_path: Path) -> None:
    """Between snapshots the panel's clock finds new lines but leaves them a moment for the
    snapshot that usually follows (it draws them with the journal's); with none, they still
    come on their own; a large catch-up is read by a thread."""
    from tui.widgets import output

    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        assert panel.target is not None and panel.reader is not None
        await until(pilot, lambda: "▸ Read api.py" in output_text(monitor))
        offset = panel.reader.offset
        with open(panel.target.path, "a") as out:
            out.write("said between snapshots\n")
        panel.tick()
        assert panel.reader.offset == offset and panel.reading is None  # held, not read
        await until(pilot, lambda: "said between snapshots" in output_text(monitor))
        with open(panel.target.path, "a") as out:
            out.writelines("x" * 80 + "\n" for _ in range(output.SMALL_READ // 80 + 10))
            out.write("after a flood\n")
        await until(pilot, lambda: "after a flood" in output_text(monitor))
        assert panel.reads_in_thread == 1


async def test_the_output_panel_follows_its_file_by_watching_it_not_on_a_clock(tmp_path: Path) -> None:
    """The panel looks at its file when its watch says it was written: no clock of its own;
    lines written between snapshots, and a file that appears only later, still show."""
    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)  # no snapshot follows the writes: only the panel's watch
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        assert panel.target is not None and panel.watching
        await until(pilot, lambda: "▸ Read api.py" in output_text(monitor))
        assert panel.ticker is None and not panel.clocks.timers and not panel.clocks.each_second
        with open(panel.target.path, "a") as out:
            out.write("said between snapshots\n")
        await until(pilot, lambda: "said between snapshots" in output_text(monitor))
        panel.target = Followed(str(tmp_path / "not-yet.log"), "iteration log")
        await pilot.pause()
        (tmp_path / "not-yet.log").write_text("here at last\n")
        await until(pilot, lambda: "here at last" in output_text(monitor))
        panel.target = Followed(str(tmp_path / "no-folder" / "0001.log"), "iteration log")
        await until(pilot, lambda: panel.ticker is not None)  # no folder to watch: the clock looks


async def test_the_output_clock_rests_while_the_followed_file_is_not_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no watch to be had (no inotify watches left), a file followed that is not there
    (yet, or any more: a loop's logs archived) is looked at on the slow clock once it has been
    missing for a while, not twenty times a second."""
    from tui import watch
    from tui.widgets import output

    def no_watches_left(*paths: Any, **kw: Any) -> Any:
        raise OSError(errno.ENOSPC, "OS file watch limit reached")

    monkeypatch.setattr(watch, "awatch", no_watches_left)
    ws = make(tmp_path, "running")
    monitor = app(ws, watch=False, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        panel.target = Followed(str(tmp_path / "not-yet.log"), "iteration log")
        await until(pilot, lambda: panel.ticker is not None)
        assert panel.ticker is not None
        for _ in range(output.QUIET_TICKS):
            panel.tick()
        assert not panel.ticker._active.is_set()  # paused: the slow clock looks now and then
        (tmp_path / "not-yet.log").write_text("here at last\n")
        await until(pilot, lambda: "here at last" in output_text(monitor))


async def test_output_panel_shows_every_clis_words_and_tool_calls(tmp_path: Path) -> None:
    """Codex's, Gemini's and OpenCode's JSON lines (real outputs) in the iteration log show as the
    agent's text and its tool calls, as Claude Code's do."""
    from tests.conftest import FIXTURES

    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        panel = monitor.query_one(OutputPanel)
        assert panel.target is not None
        for name in ("codex-success.exit0", "gemini-stream.exit0", "opencode-success.exit0"):
            with open(panel.target.path, "a") as out:
                out.write((FIXTURES / "agents" / f"{name}.log").read_text())
        await until(pilot, lambda: output_text(monitor).count("Ticked one task.") == 3)
        shown = output_text(monitor)
        assert "▸ shell /bin/bash -lc" in shown  # codex
        assert "▸ run_shell_command sed -i" in shown  # gemini
        assert "▸ bash sed -i" in shown  # opencode
        assert '"type"' not in shown  # no raw JSON


def test_render_line_reads_the_iterations_cli_first() -> None:
    line = '{"type":"item.started","item":{"type":"command_execution","command":"ls"}}'
    (shown,) = render_line(line, "codex")
    assert shown.plain == "▸ shell ls" and str(shown.style) == "cyan"
    assert [t.plain for t in render_line(line)] == ["▸ shell ls"]  # found out without the hint
    assert render_line('{"type":"turn.started"}', "codex") == []


# --- one registry of actions ---------------------------------------------------------------------


def test_bindings_help_and_palette_come_from_the_registry() -> None:
    from tui.screens.main import MAIN_SCOPES, MainScreen

    ids = {b.id for b in MainScreen.BINDINGS if not isinstance(b, tuple) and b.id}
    assert ids == {k.id for k in actions.KEYS if k.scope in MAIN_SCOPES}
    text = actions.help_plain({})
    for key in actions.KEYS:
        assert key.help in text


async def test_a_keymap_file_rebinds_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keys]\n"loop.pause" = "z"\n')
    monkeypatch.setenv("LOOPDECK_KEYMAP", str(keymap))
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        await pilot.press("p")  # no longer pause
        await pilot.press("z")
        await pilot.press("question_mark")
        assert isinstance(monitor.screen, TextScreen)
        assert "z · pause the loop" in monitor.screen.body
    assert [c["kind"] for c in commands(ws)] == ["pause"]


def test_a_broken_keymap_is_reported_and_ignored(tmp_path: Path) -> None:
    broken = tmp_path / "keymap.toml"
    broken.write_text("[keys\n")
    keymap, problem = actions.load_keymap(broken)
    assert keymap == {} and problem is not None and "ignored" in problem


# --- modals ----------------------------------------------------------------------------------------


async def test_an_escalation_that_no_longer_applies_says_so_and_closes(tmp_path: Path) -> None:
    ws = make(tmp_path, "escalation")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, EscalationScreen)
        state = StateStore(ws).read()
        assert state is not None
        ws.state.unlink()  # the loop ended elsewhere (archived by the CLI, say)
        monitor.load_snapshot()
        await until(pilot, lambda: not isinstance(monitor.screen, EscalationScreen))
        assert monitor.moot_prompts == ["the loop ended"]
    assert commands(ws) == []


# --- the finished screen -------------------------------------------------------------------------


async def test_the_finished_screen_shows_the_summary_and_the_verification_history(tmp_path: Path) -> None:
    ws = make(tmp_path, "completed")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE):
        await screenshots.settle(monitor)
        facts = text_of(monitor, "#iteration-facts")
        assert "ended: completed" in facts and "21 iterations in" in facts
        assert "21 commits" in facts and "$4.87" in facts
        assert "runs: 20 passed, 1 failed" in text_of(monitor, "#verification-mode")
        assert "loopdeck run" in screen_text(monitor)
        assert not monitor.query_one(OutputPanel).display


# --- words and pipes -------------------------------------------------------------------------------


def test_no_internal_references_in_what_people_read() -> None:
    """No seed or section numbers in the monitor, the prompts or the log lines."""
    for folder in ("tui",):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text()
            if path.name == "resume.py":  # tui/screens/resume.py belongs to the resume work
                continue
            assert "§" not in text and "seed 0" not in text, path
    from loop.core import events, prompts

    for module in (events, prompts):
        source = Path(module.__file__ or "").read_text()
        assert "§" not in source and "seed 0" not in source and "Stop blocked" not in source


@pytest.mark.parametrize("verb", ["status", "sources", "log"])
def test_verbs_survive_a_closed_pipe(tmp_path: Path, verb: str) -> None:
    ws = make(tmp_path, "running")
    for n in range(400):  # enough output to fill the pipe
        Journal(ws.journal).append("warning", 12, {"message": f"line {n}"})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = " ".join([*loopdeck_cmd(), "-C", str(ws.root), verb])
    done = subprocess.run(
        f"{command} | head -1", shell=True, env=env, capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.stdout.strip()


def test_text_status_shows_the_sources_with_their_pending_counts(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "-C", str(ws.root), "status"],
        env=env,
        capture_output=True,
        text=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("sources"))
    assert "3 pending" in line and "task_file 2" in line


# --- layouts that fit ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", ["running", "completed", "workers", "escalation"])
def test_layout_snapshot(snap_compare: Any, tmp_path: Path, name: str, size: tuple[int, int]) -> None:
    ws = make(tmp_path, name)
    assert snap_compare(screenshots.app_for(ws), terminal_size=size, run_before=_settled())


def test_output_full_screen_snapshot(snap_compare: Any, tmp_path: Path) -> None:
    ws = make(tmp_path, "running")

    async def run_before(pilot: Pilot[None]) -> None:
        await screenshots.settle(pilot.app)
        await pilot.press("o")
        await screenshots.settle(pilot.app)
        await pilot.pause()

    assert snap_compare(screenshots.app_for(ws), terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("name", ["resume", "unconfirmed"])
def test_prompt_snapshot_at_80x24(snap_compare: Any, tmp_path: Path, name: str) -> None:
    """Every prompt fits 80x24 with all its buttons, and its own footer says its keys."""
    ws = make(tmp_path, name)
    assert snap_compare(screenshots.app_for(ws), terminal_size=(80, 24), run_before=_settled())


def test_journal_full_screen_snapshot_at_80x24(snap_compare: Any, tmp_path: Path) -> None:
    """The journal alone, the top bar kept, and the footer saying Escape goes back."""
    ws = make(tmp_path, "running")

    async def run_before(pilot: Pilot[None]) -> None:
        await screenshots.settle(pilot.app)
        await pilot.press("l")
        await screenshots.settle(pilot.app)
        await pilot.pause()

    assert snap_compare(screenshots.app_for(ws), terminal_size=(80, 24), run_before=run_before)


async def test_at_80x24_every_panel_keeps_its_essentials_and_quit_shows(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=(80, 24)):
        await screenshots.settle(monitor)
        assert "task: Expose the list endpoint" in text_of(monitor, "#iteration-facts")
        assert (
            monitor.query_one("#iteration-facts").region.bottom <= monitor.query_one("#panels").region.bottom
        )
        sources = screen_text(monitor)
        assert "GitHub project" in sources and "Task file" in sources
        keys = [k.key for k in monitor.query("FooterKey")]  # type: ignore[attr-defined]
        quit_key = next(k for k in monitor.query("FooterKey") if getattr(k, "key", "") == "q")
        assert quit_key.region.right <= 80 and keys


# --- git followed live -------------------------------------------------------------------------------


def test_the_tree_filter_skips_ignored_files_and_loopdecks_own(tmp_path: Path) -> None:
    from tui.watch import tree_filter

    (tmp_path / ".gitignore").write_text("build/\n*.log\n# a comment\n")
    accept = tree_filter(tmp_path)
    root = str(tmp_path)
    assert accept(None, f"{root}/src/app.py")
    assert accept(None, f"{root}/.git/HEAD") and accept(None, f"{root}/.git/refs/heads/main")
    assert not accept(None, f"{root}/.git/objects/ab/cdef")
    assert not accept(None, f"{root}/.claude/orchestrator-loop.local.md")
    assert not accept(None, f"{root}/build/out.o") and not accept(None, f"{root}/src/debug.log")


async def test_git_is_followed_live_when_the_tree_changes(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    monitor = app(ws, watch=True, git=True)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert "2 new" in text_of(monitor, "#git")
        await pilot.pause(0.3)  # the watcher is up
        (ws.root / "fresh.py").write_text("print('hi')\n")
        await until(pilot, lambda: "3 new" in text_of(monitor, "#git"))

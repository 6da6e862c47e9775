"""A command is applied at most once, whatever queue offset the state holds: a state put back by
hand (its backup copied over it) carries an older offset, and the journal knows what was applied."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loop.drivers.runner import Options, Runner
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.test_control import person
from tests.test_hook import Session


def applied(ws: Workspace, command_id: str) -> int:
    events = Journal(ws.journal).tail(10_000).events
    return sum(1 for e in events if e.kind == "command-applied" and e.data.get("id") == command_id)


def test_a_skip_is_applied_once_when_the_backup_is_copied_over_the_state(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    todo = ws.root / "TODO.md"
    todo.write_text("- [ ] one\n- [ ] two\n- [ ] three\n")
    session = Session(ws, {})
    assert (
        session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github", "--no-tasks").returncode == 0
    )
    assert (session.stop(active=False) or {})["decision"] == "block"
    command = control.queue(ws, "skip", source="cli", key=person(ws))
    assert (session.stop() or {})["decision"] == "block"
    assert todo.read_text().count("- [-]") == 1 and applied(ws, command.id) == 1
    # A person puts the backup back by hand: its offset is from before the skip.
    backup = StateStore(ws).read_backup()
    assert backup is not None and backup.control_offset < control.end_offset(ws)
    shutil.copyfile(ws.backup, ws.state)
    assert (session.stop() or {})["decision"] == "block"
    assert applied(ws, command.id) == 1
    assert todo.read_text().count("- [-]") == 1, todo.read_text()
    assert [e.kind for e in Journal(ws.journal).tail(10_000).events].count("task-skipped") == 1
    # and a new command is applied as ever
    second = control.queue(ws, "skip", source="cli", key=person(ws))
    session.stop()
    assert applied(ws, second.id) == 1 and todo.read_text().count("- [-]") == 2


def test_the_runner_skips_a_command_the_journal_says_was_applied(ws: Workspace, tmp_path: Path) -> None:
    from loop import trust
    from loop.store.state import LoopState

    store = StateStore(ws)
    state = LoopState.new("x", check_tasks=False, check_github=False, driver="runner")
    store.write(state)
    trust.record(ws, state, "test")
    command = control.queue(ws, "pause", source="cli")
    runner = Runner(ws, Options(agent="true"))
    first = runner.decide(None)
    assert first.state is not None and first.state.status == "paused" and applied(ws, command.id) == 1
    shutil.copyfile(ws.backup, ws.state)  # the offset from before the pause
    resumed = control.queue(ws, "resume", source="cli", key=person(ws))
    again = runner.decide(None)
    assert applied(ws, command.id) == 1 and applied(ws, resumed.id) == 1
    assert again.state is not None and again.state.status == "running"
    assert runner.pending_interrupt() is None

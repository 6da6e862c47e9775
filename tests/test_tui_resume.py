"""The monitor's resume prompt (pilot tests): one per classification, with the git choices.
The monitor never writes the state: its answers are commands, git operations and a runner."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from loop.drivers import resume
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.test_tui import SIZE, app, commands, isolated, make
from tools import screenshots
from tui.screens.resume import ResumeScreen

__all__ = ["isolated"]


def set_state(ws: Workspace, **values: object) -> None:
    state = StateStore(ws).read()
    assert state is not None
    for key, value in values.items():
        setattr(state, key, value)
    StateStore(ws).write(state)


async def test_paused_loop_stashes_the_changes_then_resumes(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    set_state(ws, driver="hook", pid=None, status="paused")
    monitor = app(ws)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ResumeScreen)
        assert monitor.screen.changes == ("?? api.py", "?? notes.md")
        await pilot.press("s")
        assert monitor.screen.git_choice == "stash"
        await pilot.press("y")
        await pilot.pause()
    assert [c["kind"] for c in commands(ws)] == ["resume"]
    listed = subprocess.run(["git", "stash", "list"], cwd=ws.root, capture_output=True, text=True)
    assert "loopdeck resume: loop started" in listed.stdout
    assert not (ws.root / "notes.md").exists()


async def test_paused_loop_commits_the_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.delenv(key, raising=False)  # GitPython's commit reads neither in ISO form
    ws = make(tmp_path, "running")
    set_state(ws, driver="hook", pid=None, status="paused")
    monitor = app(ws)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ResumeScreen)
        await pilot.press("m", "y")
        await pilot.pause()
    log = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=ws.root, capture_output=True, text=True)
    assert "loopdeck: work in progress at resume" in log.stdout


async def test_a_gone_runner_is_restarted_on_yes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make(tmp_path, "resume")
    started: list[Workspace] = []

    def fake_start(w: Workspace) -> int:
        started.append(w)
        return 4242

    monkeypatch.setattr(resume, "start_runner", fake_start)
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ResumeScreen)
        assert monitor.screen.question.startswith("Found in-progress loop")
        await pilot.press("y")
        await pilot.pause()
    assert started == [ws] and commands(ws) == []  # running already: the new runner drives it


async def test_a_waiting_loop_says_why(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    waiting = {
        "kind": "usage-limit",
        "reason": "usage limit reached",
        "since": "t",
        "until": "2026-01-09T12:00:00Z",
    }
    set_state(ws, driver="hook", pid=None, status="paused", waiting_for=waiting)
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ResumeScreen)
        assert monitor.screen.question.startswith("Waiting for a usage limit to reset")
        await pilot.press("n")
    assert commands(ws) == []  # already paused: "no" leaves it so


async def test_a_stopping_loop_is_marked_complete(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    set_state(ws, driver="hook", pid=None, status="stopping")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ResumeScreen)
        assert monitor.screen.question == "Loop was stopping. Mark complete and show summary? [Y/n]"
        await pilot.press("y")
        await pilot.pause()
    assert [c["kind"] for c in commands(ws)] == ["complete"]


async def test_a_live_loop_asks_nothing(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")
    set_state(ws, driver="runner", pid=os.getpid(), status="running")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert not isinstance(monitor.screen, ResumeScreen)
        await pilot.pause()
    assert commands(ws) == []

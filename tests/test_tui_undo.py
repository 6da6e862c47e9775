"""Undo from the monitor: a loop of workers lands tasks (real git, scripted workers), then `u`,
a pick, a yes; the verb's own code reverts the task and reopens it, or refuses, in a notice."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import OptionList

from loop.core.model import LoopState
from loop.demo import graph as demo_graph
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.test_parallel import events, run
from tests.test_parallel import repo as repo
from tests.test_tui import SIZE, app, make, text_of, until
from tui.app import LoopdeckApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.undo import Landings, UndoScreen


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def landed_two(repo: Workspace) -> Path:
    graph = demo_graph.create(
        repo.root / "graph", (("1", "Model", (), ("a.py",)), ("2", "Store", (), ("b.py",)))
    )
    done = run(repo, graph, "--workers", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    return graph


def notices(monitor: LoopdeckApp) -> list[str]:
    return [str(n.message) for n in monitor._notifications]


async def pick(monitor: LoopdeckApp, pilot: Pilot[None], task: str) -> None:
    """`u`, then the task's row chosen with the arrows and Enter."""
    await until(pilot, lambda: monitor.check_action("undo", ()) is True)
    await pilot.press("u")
    await until(pilot, lambda: isinstance(monitor.screen, UndoScreen))
    options = monitor.screen.query_one(OptionList)
    ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
    merged = [str(e.data["task"]) for e in events(monitor.workspace) if e.kind == "task-merged"]
    assert ids == list(reversed(merged))  # newest first
    for _ in range(ids.index(task)):
        await pilot.press("down")
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(monitor.screen, ConfirmScreen))


async def test_u_undoes_a_landed_task_from_the_monitor(repo: Workspace) -> None:
    graph = landed_two(repo)
    tip = git(repo.root, "rev-parse", "HEAD").strip()
    branch = git(repo.root, "branch", "--show-current").strip()
    monitor = app(repo, git=False, prompts=False)
    async with monitor.run_test(size=SIZE, notifications=True) as pilot:
        await pick(monitor, pilot, "1")
        screen = monitor.screen
        assert isinstance(screen, ConfirmScreen)
        assert screen.question == "Undo task 1 'Model'?"
        assert screen.detail == f"A revert commit is added to {branch}; the task is reopened."
        await pilot.press("y")
        await until(pilot, lambda: any("task 1 undone on" in n for n in notices(monitor)))
        await until(pilot, lambda: monitor.landed == ("2",))  # read again: only task 2 is landed
        # the last loop's summary counted it done: the panel says it was undone since
        await until(
            pilot,
            lambda: "undone since (1): task 1" in " ".join(text_of(monitor, "#iteration-facts").split()),
        )
    assert git(repo.root, "log", "-1", "--format=%s").strip() == "loopdeck: undo task 1"
    assert git(repo.root, "rev-parse", "HEAD~1").strip() == tip  # a new commit: history only grows
    assert not (repo.root / "a.py").exists() and (repo.root / "b.py").exists()
    assert json.loads((graph / "1.json").read_text())["status"] == "pending"
    assert [e.data["task"] for e in events(repo) if e.kind == "task-undone"] == ["1"]


async def test_a_refused_undo_is_a_notice_and_escape_cancels(repo: Workspace) -> None:
    landed_two(repo)
    tip = git(repo.root, "rev-parse", "HEAD").strip()
    (repo.root / "a.py").write_text("a person's edit of task 1's file, not committed\n")
    monitor = app(repo, git=False, prompts=False)
    async with monitor.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: monitor.check_action("undo", ()) is True)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(monitor.screen, UndoScreen))
        await pilot.press("escape")  # cancels: nothing asked, nothing done
        await until(pilot, lambda: not isinstance(monitor.screen, UndoScreen))
        assert not isinstance(monitor.screen, ConfirmScreen)
        await pick(monitor, pilot, "2")
        await pilot.press("n")  # no: nothing done
        await until(pilot, lambda: not isinstance(monitor.screen, ConfirmScreen))
        await pick(monitor, pilot, "1")
        await pilot.press("y")
        refused = "has uncommitted changes in a.py, which the undo takes back"
        await until(pilot, lambda: any(refused in n for n in notices(monitor)))
        assert set(monitor.landed) == {"1", "2"} and not isinstance(
            monitor.screen, (UndoScreen, ConfirmScreen)
        )
    assert git(repo.root, "rev-parse", "HEAD").strip() == tip
    assert not [e for e in events(repo) if e.kind == "task-undone"]


async def test_the_key_is_off_while_a_runner_drives_the_loop(repo: Workspace) -> None:
    """`loopdeck undo` refuses then (the runner's merge queue moves the branch): the key is not
    offered, as a pause is not on a paused loop; a runner that starts after the pick is refused
    by the verb's own check, in a notice."""
    landed_two(repo)
    monitor = app(repo, git=False, prompts=False)
    async with monitor.run_test(size=SIZE, notifications=True) as pilot:
        await pick(monitor, pilot, "1")
        state = LoopState.new("Build it")
        state.status, state.pid = "running", os.getpid()  # this process: a live runner
        StateStore(repo).write(state)
        await pilot.press("y")
        refused = "a runner drives the loop"
        await until(pilot, lambda: any(refused in n and "stop it first" in n for n in notices(monitor)))
        await until(pilot, lambda: monitor.snapshot is not None and monitor.snapshot.loop is not None)
        assert monitor.check_action("undo", ()) is False
    assert not [e for e in events(repo) if e.kind == "task-undone"]


async def test_the_key_is_offered_only_with_a_landed_task(tmp_path: Path) -> None:
    ws = make(tmp_path, "running")  # a loop of one agent: nothing lands
    monitor = app(ws, git=False, prompts=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: monitor.snapshot is not None)
        assert monitor.check_action("undo", ()) is False
        assert "task.undo" not in {b.binding.id for b in monitor.screen.active_bindings.values() if b.enabled}


def test_landings_follow_the_journal_by_what_was_appended(tmp_path: Path) -> None:
    from loop.store.journal import Journal

    ws = Workspace(tmp_path)
    ws.journal.parent.mkdir(parents=True, exist_ok=True)
    journal, landings = Journal(ws.journal), Landings(ws.journal)
    assert landings.read() == ()
    for kind, task in (("task-merged", "1"), ("task-merged", "2"), ("task-merged", "3")):
        journal.append(kind, None, {"task": task, "sha": f"{task}abc"})
    assert landings.read() == ("3", "2", "1")
    journal.append("task-undone", None, {"task": "2"})
    journal.append("task-merged", None, {"task": "1", "sha": "1def"})  # landed again: newest
    assert landings.read() == ("1", "3")
    ws.journal.unlink()  # a new loop's journal: read from its start
    journal.append("task-merged", None, {"task": "9", "sha": "9abc"})
    assert landings.read() == ("9",)

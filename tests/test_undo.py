"""`loopdeck undo TASK`: a landed task reverted by a revert commit, opened again, landed again
by the next run; real git, scripted workers."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from loop.demo import graph as demo_graph
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.conftest import REPO
from tests.test_parallel import PY, events, run
from tests.test_parallel import repo as repo


def undo(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDECODE", "CLAUDE_CODE"))}
    env["PYTHONPATH"] = str(REPO)
    argv = [PY, "-m", "loop.cli", "-C", str(ws.root), "undo", *args]
    return subprocess.run(argv, cwd=ws.root, env=env, capture_output=True, text=True, timeout=60)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def test_undo_reverts_a_landed_task_reopens_it_and_the_next_run_lands_it_again(repo: Workspace) -> None:
    graph = demo_graph.create(
        repo.root / "graph", (("1", "Model", (), ("a.py",)), ("2", "Store", (), ("b.py",)))
    )
    done = run(repo, graph, "--workers", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task 1: Model" in (repo.root / "a.py").read_text()
    assert git(repo.root, "for-each-ref", "--format=%(refname)", "refs/loopdeck/backup/").count("/1-") >= 1
    tip = git(repo.root, "rev-parse", "HEAD").strip()

    undone = undo(repo, "1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "task 1 undone on" in undone.stdout and "pending again" in undone.stdout
    assert not (repo.root / "a.py").exists() and (repo.root / "b.py").exists()  # task 2 stays
    assert git(repo.root, "rev-parse", "HEAD~1").strip() == tip  # a new commit: history only grows
    assert git(repo.root, "log", "-1", "--format=%s").strip() == "loopdeck: undo task 1"
    assert json.loads((graph / "1.json").read_text())["status"] == "pending"
    assert json.loads((graph / "2.json").read_text())["status"] == "completed"
    assert [e.data["task"] for e in events(repo) if e.kind == "task-undone"] == ["1"]

    again = undo(repo, "1")  # refused in one line
    assert again.returncode != 0 and "task 1 is not landed: it was undone" in again.stderr
    assert "Traceback" not in again.stderr
    unknown = undo(repo, "9")
    assert unknown.returncode != 0 and "task 9 has not landed" in unknown.stderr

    rerun = run(repo, graph, "--workers", "2")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "task 1: Model" in (repo.root / "a.py").read_text()
    merged = [e.data["task"] for e in Journal(repo.journal).read_from(0).events if e.kind == "task-merged"]
    assert merged.count("1") == 2 and merged.count("2") == 1
    assert json.loads((graph / "1.json").read_text())["status"] == "completed"


def test_undo_is_refused_inside_an_agent_and_while_a_runner_drives_the_loop(repo: Workspace) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CLAUDECODE": "1"}
    argv = [PY, "-m", "loop.cli", "-C", str(repo.root), "undo", "1"]
    inside = subprocess.run(argv, cwd=repo.root, env=env, capture_output=True, text=True, timeout=60)
    assert inside.returncode != 0 and "`loopdeck undo` is for a person" in inside.stderr


def test_undo_waits_for_no_runner(repo: Workspace) -> None:
    from loop.cli.undo import undo_task
    from loop.core.errors import LoopdeckError
    from loop.core.model import LoopState
    from loop.store.state import StateStore

    state = LoopState.new("Build it")
    state.status, state.pid = "running", os.getpid()  # this process: a live runner
    StateStore(repo).write(state)
    with pytest.raises(LoopdeckError, match=r"a runner drives the loop .* stop it first"):
        undo_task(repo, "1")

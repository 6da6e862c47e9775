"""A conflicting branch goes to an agent turn that is told both sides' intent, is verified
and lands like any other; a second conflict on the same task goes to a person, its files
named. Real git, scripted workers (the demo worker resolves conflict markers by keeping both
sides)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

from loop.core import scheduler, workflow
from loop.core.board import Board, Worker
from loop.core.model import LoopState
from loop.core.timeutil import utcnow
from loop.demo import graph as demo_graph
from loop.repo import landing, worktrees
from loop.store.paths import Workspace
from tests.conftest import REPO
from tests.test_parallel import PY, events
from tests.test_parallel import repo as repo


def test_a_conflict_is_resolved_by_an_agent_turn_told_both_sides_then_lands(repo: Workspace) -> None:
    graph = demo_graph.create(
        repo.root / "graph",
        (("1", "Write the greeting", (), ("shared.txt",)), ("2", "Write the farewell", (), ("x.txt",))),
    )
    seen = repo.root.parent / "prompts.txt"
    script = repo.root.parent / "agent.py"  # the demo worker, keeping each prompt it read
    script.write_text(
        "import io, sys\n"
        "from loop.demo import worker\n"
        "prompt = sys.stdin.read()\n"
        f"open({str(seen)!r}, 'a').write(prompt + '\\n----\\n')\n"
        "sys.stdin = io.StringIO(prompt)\n"
        "sys.exit(worker.main(sys.argv[1:]))\n"
    )
    agent = f"{PY} {script} --stray 2:shared.txt --stray 1:x.txt"
    argv = [PY, "-m", "loop.cli", "-C", str(repo.root), "run", "Build it", "--workers", "2"]
    argv += ["--graph", str(graph), "--agent", agent, "--headless"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(argv, cwd=repo.root, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    evs = events(repo)
    conflicts = [e for e in evs if e.kind == "merge-conflict"]
    assert len(conflicts) == 1
    assert "shared.txt" in conflicts[0].data["reason"] or "x.txt" in conflicts[0].data["reason"]
    assert sorted(e.data["task"] for e in evs if e.kind == "task-merged") == ["1", "2"]
    assert not any(e.kind == "escalation" for e in evs)
    text = (repo.root / "shared.txt").read_text()
    assert "task 1: Write the greeting" in text and "<<<<<<<" not in text
    prompts = seen.read_text()
    assert "Both sides' intent" in prompts
    assert "task 1: Write the greeting" in prompts or "task 2: Write the farewell" in prompts


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def committed(root: Path, text: str, message: str) -> None:
    """`a.txt` written and committed on the branch checked out."""
    (root / "a.txt").write_text(text)
    git(root, "add", "a.txt")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", message)


def test_a_second_conflict_on_the_same_task_asks_a_person_naming_the_files(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "base")
    git(root, "checkout", "-q", "-b", "loopdeck/L/2")
    committed(root, "ours\n", "loopdeck: task 2 (worker-2, turn 1)")
    git(root, "checkout", "-q", "main")
    committed(root, "theirs\n", "loopdeck: task 1 (worker-1, turn 1)")
    clash = worktrees.merge(root, "loopdeck/L/2", "loopdeck: merge task 2")
    assert not clash.merged and clash.conflicts == ("a.txt",)
    theirs = landing.sides(root, "loopdeck/L/2", "main", clash.conflicts)
    assert theirs == [("1", "")]

    board = Board(graph="g", capacity=2, isolation="worktree", loop_branch="main", serial=2)
    worker = Worker(
        "worker-2", "2", ("a.txt",), "2026-01-01T00:00:00Z", status="queued", branch="loopdeck/L/2"
    )
    state = scheduler.keep(LoopState.new("Build it"), replace(board, workers=(worker,), queue=("worker-2",)))
    state.status = "running"
    intent = ("Write the farewell", [("1", "Write the greeting")])
    step = workflow.merge_ended(
        state, "worker-2", sha=None, conflicts=clash.conflicts, hunks=clash.hunks, intent=intent, now=utcnow()
    )
    again = step.board.workers[0]
    assert (again.status, again.rework) == ("ready", "conflict")  # an agent turn first
    assert "task 1: Write the greeting" in (again.feedback or "") and "Write the farewell" in (
        again.feedback or ""
    )
    state = scheduler.keep(step.seal(), replace(step.board, queue=("worker-2",)))
    second = workflow.merge_ended(
        state, "worker-2", sha=None, conflicts=clash.conflicts, hunks=clash.hunks, intent=intent, now=utcnow()
    ).seal()
    assert second.status == "paused" and (second.waiting_for or {}).get("escalation") == "merge-conflict"
    assert "a.txt" in str((second.waiting_for or {}).get("reason"))

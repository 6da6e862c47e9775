"""A loop of workers killed again and again: every restart goes on from what the state says.

The runner is SIGKILLed at random moments (deciding, writing, merging, a worker mid-turn) and
started again, fifty times; then it runs to the end. No task is done twice (each task's line is
in its files once, merged once), none is lost, no owner, lock, branch or worktree is left."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loop.demo import graph as demo_graph
from loop.demo import workspace
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.conftest import REPO

PY = sys.executable
KILLS = 50
PACE = ("--sleep", "0.2", "0.6")
TASKS = (
    ("1", "Model", (), ("src/model.py",)),
    ("2", "Storage", ("1",), ("src/store.py",)),
    ("3", "List", ("1",), ("src/api.py",)),
    ("4", "Create", ("1",), ("src/api.py",)),
    ("5", "Readme", (), ("README.md",)),
    ("6", "Changelog", (), ("CHANGELOG.md", "README.md")),
    ("7", "Config", (), ("src/config.py",)),
    ("8", "Smoke", ("2", "3", "4"), ("tests/smoke.py",)),
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@example.invalid")
    return Workspace(workspace.create(tmp_path / "repo", tasks=1))


def test_fifty_random_sigkills_lose_no_task_and_do_none_twice(repo: Workspace) -> None:
    graph = demo_graph.create(repo.root / "graph", TASKS)
    agent = " ".join([PY, "-m", "loop.demo.worker", *PACE])
    argv = [PY, "-m", "loop.cli", "-C", str(repo.root), "run", "Build it", "--workers", "3"]
    argv += [
        "--graph",
        str(graph),
        "--agent",
        agent,
        "--headless",
        "--max-iterations",
        "0",
    ]  # kills cost turns
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(2026)
    kills = 0
    while kills < KILLS:
        proc = subprocess.Popen(
            argv, cwd=repo.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            proc.wait(timeout=rng.uniform(0.15, 0.9))  # a random moment of its work
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            kills += 1
            continue
        break  # it finished between two kills
    done = subprocess.run(argv, cwd=repo.root, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    events = Journal(repo.journal).read_from(0).events
    merged = [e.data["task"] for e in events if e.kind == "task-merged"]
    assert sorted(merged, key=int) == [t[0] for t in TASKS], merged  # each merged once, none lost
    for ident, subject, _b, files in TASKS:
        for name in files:
            lines = (repo.root / name).read_text().splitlines()
            assert lines.count(f"task {ident}: {subject}") == 1, (ident, name, lines)
    for path in sorted(graph.glob("*.json")):
        task = json.loads(path.read_text())
        assert task["status"] == "completed", task
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo.root, capture_output=True, text=True)
    assert len(listed.stdout.splitlines()) == 1, listed.stdout
    branches = subprocess.run(["git", "branch"], cwd=repo.root, capture_output=True, text=True).stdout
    assert "loopdeck/" not in branches, branches
    assert not repo.state.exists()  # archived: no board, no lock table left
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # no worker outlived its runner
        found = subprocess.run(["pgrep", "-f", "loop.demo.worker"], capture_output=True, text=True)
        mine = [p for p in found.stdout.split() if str(repo.root) in _cwd(p)]
        if not mine:
            break
        time.sleep(0.1)
    assert not mine


def _cwd(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""

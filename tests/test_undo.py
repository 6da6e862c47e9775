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
    return verb(ws, "undo", *args)


def verb(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDECODE", "CLAUDE_CODE"))}
    env["PYTHONPATH"] = str(REPO)
    argv = [PY, "-m", "loop.cli", "-C", str(ws.root), *args]
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
    # the loop ended and was archived: no backup of its state is left to bring it back to life
    assert not repo.state.exists() and not repo.backup.exists()
    repo.state.write_text("garbage\n")
    restored = verb(repo, "restore")
    assert restored.returncode == 1 and "no backup" in restored.stderr, restored.stderr
    repo.state.unlink()

    undone = undo(repo, "1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "task 1 undone on" in undone.stdout and "pending again" in undone.stdout
    assert not (repo.root / "a.py").exists() and (repo.root / "b.py").exists()  # task 2 stays
    assert git(repo.root, "rev-parse", "HEAD~1").strip() == tip  # a new commit: history only grows
    assert git(repo.root, "log", "-1", "--format=%s").strip() == "loopdeck: undo task 1"
    assert json.loads((graph / "1.json").read_text())["status"] == "pending"
    assert json.loads((graph / "2.json").read_text())["status"] == "completed"
    assert [e.data["task"] for e in events(repo) if e.kind == "task-undone"] == ["1"]
    # the last run's summary counted it done: status says it is not any more
    assert "undone       task 1 at " in verb(repo, "status").stdout

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
    assert "undone" not in verb(repo, "status").stdout  # landed again


def test_undo_keeps_other_uncommitted_changes_and_refuses_those_it_would_take_back(repo: Workspace) -> None:
    """A task graph kept in git holds the loop's status lines, uncommitted, after every run (and
    every undo): they never block an undo. A person's edit of a file the undo takes back does,
    as a staged change does, each said in one line."""
    graph = demo_graph.create(
        repo.root / "graph", (("1", "Model", (), ("a.py",)), ("2", "Store", (), ("b.py",)))
    )
    git(repo.root, "add", "graph")
    git(repo.root, "commit", "-qm", "the task graph, kept in git")
    done = run(repo, graph, "--workers", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(repo.root, "status", "--porcelain", "--", "graph").strip()  # the loop's own lines
    edit = "a person's edit, not committed\n"
    (repo.root / "b.py").write_text(edit)

    undone = undo(repo, "1")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert not (repo.root / "a.py").exists() and (repo.root / "b.py").read_text() == edit
    assert git(repo.root, "show", "--name-only", "--format=", "HEAD").split() == ["a.py"]

    refused = undo(repo, "2")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "uncommitted changes in b.py, which the undo takes back" in refused.stderr
    git(repo.root, "add", "b.py")
    staged = undo(repo, "2")
    assert staged.returncode != 0 and "has staged changes: commit or unstage them" in staged.stderr
    assert (repo.root / "b.py").read_text() == edit  # nothing a person wrote was lost


def test_a_file_a_landing_changed_and_changed_back_is_still_one_the_undo_takes_back(tmp_path: Path) -> None:
    """Its net change is nothing, yet `git revert` would refuse to overwrite a person's edit of
    it: the edit is named before anything is tried."""
    from loop.repo import landing

    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for key, value in (("user.name", "t"), ("user.email", "t@example.invalid")):
        git(root, "config", key, value)
    (root / "x.txt").write_text("one\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    before = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-qb", "task")
    (root / "x.txt").write_text("two\n")
    git(root, "commit", "-qam", "change x")
    (root / "x.txt").write_text("one\n")
    (root / "y.txt").write_text("new\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "x back, y new")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "-m", "land task", "task")
    after = git(root, "rev-parse", "HEAD").strip()
    (root / "x.txt").write_text("a person's edit\n")
    with pytest.raises(
        landing.LandingError, match=r"uncommitted changes in x\.txt, which the undo takes back"
    ):
        landing.revert(root, before, after, "undo")
    assert (root / "x.txt").read_text() == "a person's edit\n"
    assert git(root, "rev-parse", "HEAD").strip() == after


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


def test_a_planted_backup_ref_does_not_change_what_undo_reverts(repo: Workspace) -> None:
    """An agent can write refs: one planted at an older commit, numbered above the real one,
    would have made a rebased landing's undo revert other tasks' work too. Undo goes by the
    journal's `before`, which the backup ref only has to agree with."""
    graph = demo_graph.create(
        repo.root / "graph", (("1", "Model", (), ("a.py",)), ("2", "Store", (), ("b.py",)))
    )
    done = run(repo, graph, "--workers", "2", "--merge", "rebase")
    assert done.returncode == 0, done.stdout + done.stderr
    merges = [e for e in events(repo) if e.kind == "task-merged"]
    first, last = (str(e.data["task"]) for e in merges)
    assert git(repo.root, "rev-list", "--merges", "HEAD").strip() == ""  # rebased: no merge commit
    before = str(merges[-1].data["before"])
    real = git(repo.root, "for-each-ref", "--format=%(objectname) %(refname)", "refs/loopdeck/backup/")
    assert f"{before} " in real and f"/{last}-1" in real
    start = str(merges[0].data["before"])  # the branch before either task landed
    loop = real.split("refs/loopdeck/backup/")[1].split("/")[0]
    git(repo.root, "update-ref", f"refs/loopdeck/backup/{loop}/{last}-99", start)

    undone = undo(repo, last)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    files = {"1": "a.py", "2": "b.py"}
    assert not (repo.root / files[last]).exists()
    assert (repo.root / files[first]).exists()  # the other task's work stays
    reverted = [e for e in events(repo) if e.kind == "task-undone"][-1]
    assert reverted.data["backup"] == f"refs/loopdeck/backup/{loop}/{last}-1"


def test_undo_refuses_a_landing_the_journal_does_not_vouch_for(tmp_path: Path) -> None:
    from loop.cli.undo import landed
    from loop.core.errors import LoopdeckError

    root = tmp_path / "repo"
    root.mkdir()
    ident = ("-c", "user.name=t", "-c", "user.email=t@example.invalid")
    git(root, "init", "-q")
    shas = []
    for n in range(3):
        (root / "f.txt").write_text(f"{n}\n")
        git(root, "add", "f.txt")
        git(root, *ident, "commit", "-qm", f"c{n}")
        shas.append(git(root, "rev-parse", "HEAD").strip())
    ws = Workspace(root)
    ws.journal.parent.mkdir(parents=True, exist_ok=True)
    journal = Journal(ws.journal)
    journal.append("task-merged", None, {"task": "7", "sha": shas[2]})  # an older journal: no `before`
    with pytest.raises(LoopdeckError, match=r"task 7's landing predates the journal's record"):
        landed(ws, "7")
    journal.append("task-merged", None, {"task": "7", "sha": shas[2], "before": shas[1]})
    git(root, "update-ref", "refs/loopdeck/backup/L/7-1", shas[0])  # moved: it disagrees
    with pytest.raises(LoopdeckError, match=rf"no backup ref of task 7 points at {shas[1][:12]}"):
        landed(ws, "7")
    git(root, "update-ref", "refs/loopdeck/backup/L/7-2", shas[1])
    git(root, "update-ref", "refs/loopdeck/backup/L/7-99", shas[0])  # planted: ignored
    found = landed(ws, "7")
    assert (found.before, found.after, found.backup) == (shas[1], shas[2], "refs/loopdeck/backup/L/7-2")

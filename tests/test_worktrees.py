"""Worktrees and the merge queue's git, on real repositories: a task is a branch."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loop.repo import worktrees
from loop.repo.worktrees import Worktree


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "t")
    git(root, "config", "user.email", "t@t")
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    return root


def work(wt: Worktree, name: str, text: str) -> str | None:
    (wt.path / name).write_text(text)
    return worktrees.commit_all(wt, f"change {name}")


def test_a_task_is_a_branch_made_once_and_found_again(repo: Path) -> None:
    wt = worktrees.ensure(repo, "L1", "task 3/x", "main")
    assert wt.branch == "loopdeck/L1/task-3-x" and wt.path.is_dir()
    assert work(wt, "b.txt", "b\n") is not None
    again = worktrees.ensure(repo, "L1", "task 3/x", "main")  # a retry: the same branch, its work kept
    assert again.path == wt.path and (again.path / "b.txt").read_text() == "b\n"
    assert worktrees.changed_files(again) == ["b.txt"]
    assert "loopdeck" not in git(repo, "status", "--porcelain")  # the worktrees are excluded locally
    assert "/.loopdeck/" in (repo / ".git" / "info" / "exclude").read_text()


def test_a_deleted_worktree_is_made_again_on_its_branch(repo: Path) -> None:
    import shutil

    wt = worktrees.ensure(repo, "L1", "1", "main")
    work(wt, "b.txt", "b\n")
    shutil.rmtree(wt.path)  # a crash, a person cleaning up
    again = worktrees.ensure(repo, "L1", "1", "main")
    assert (again.path / "b.txt").read_text() == "b\n"


def test_nothing_changed_commits_nothing(repo: Path) -> None:
    wt = worktrees.ensure(repo, "L1", "1", "main")
    assert worktrees.commit_all(wt, "nothing") is None
    assert worktrees.changed_files(wt) == []


def test_a_clean_merge_is_verified_then_concluded_or_abandoned(repo: Path) -> None:
    wt = worktrees.ensure(repo, "L1", "1", "main")
    work(wt, "b.txt", "b\n")
    before = worktrees.head(repo)
    outcome = worktrees.merge(repo, wt.branch, "merge 1")
    assert outcome.merged and (repo / "b.txt").exists()
    worktrees.abandon(repo)  # verification failed: the loop's branch is as it was
    assert worktrees.head(repo) == before and not (repo / "b.txt").exists()
    assert worktrees.merge(repo, wt.branch, "merge 1").merged
    sha = worktrees.conclude(repo, "merge 1")
    assert sha != before and worktrees.merged(repo, wt.branch)
    worktrees.remove(repo, wt.path, wt.branch)
    assert not wt.path.exists() and "loopdeck/L1/1" not in git(repo, "branch")


def test_a_conflict_is_undone_and_handed_back_with_its_hunks(repo: Path) -> None:
    first = worktrees.ensure(repo, "L1", "1", "main")
    second = worktrees.ensure(repo, "L1", "2", "main")
    work(first, "a.txt", "one\nTWO by first\nthree\n")
    work(second, "a.txt", "one\nTWO by second\nthree\n")
    assert worktrees.merge(repo, first.branch, "m1").merged
    worktrees.conclude(repo, "m1")
    head = worktrees.head(repo)
    clash = worktrees.merge(repo, second.branch, "m2")
    assert not clash.merged and clash.conflicts == ("a.txt",)
    assert "TWO by first" in clash.hunks and "TWO by second" in clash.hunks
    assert worktrees.head(repo) == head and worktrees.unresolved(repo) == []  # undone at once
    # rework: the loop's branch taken into the task's worktree, the markers left to resolve
    assert worktrees.take_in(second, "main") == ["a.txt"]
    assert "<<<<<<<" in (second.path / "a.txt").read_text()
    (second.path / "a.txt").write_text("one\nTWO by both\nthree\n")
    worktrees.commit_all(second, "resolved")
    assert worktrees.unresolved(second.path) == []
    assert worktrees.merge(repo, second.branch, "m2").merged
    worktrees.conclude(repo, "m2")
    assert (repo / "a.txt").read_text() == "one\nTWO by both\nthree\n"


def test_commits_need_no_identity_of_the_machine(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh machine or a container has no git identity: loopdeck's commits name loopdeck."""
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(key, raising=False)
    wt = worktrees.ensure(repo, "L1", "1", "main")
    assert work(wt, "b.txt", "b\n") is not None
    assert "loopdeck" in git(repo, "log", "-1", "--format=%an", wt.branch)


def test_leftovers_are_listed_after_a_crash(repo: Path) -> None:
    wt = worktrees.ensure(repo, "L1", "1", "main")
    worktrees.ensure(repo, "L2", "1", "main")
    assert worktrees.leftovers(repo, "L1") == [wt.path]


def test_names_from_task_ids_are_safe(repo: Path) -> None:
    for hostile in ("../../x", "-rf", "a b;c", "..", "", "$(touch p)"):
        name = worktrees.safe_name(hostile)
        assert name and not name.startswith(("-", ".")) and "/" not in name and ".." not in name
    assert worktrees.loop_id("2026-11-26T12:00:00+00:00") == "20261126T120000"


def test_tidy_takes_merged_branches_no_worktree_holds(repo: Path) -> None:
    """A runner stopped between a merge and its clean-up leaves the branch: the next run takes
    it away; a branch with work not merged stays."""
    done = worktrees.ensure(repo, "L1", "1", "main")
    work(done, "b.txt", "b\n")
    assert worktrees.merge(repo, done.branch, "m").merged
    worktrees.conclude(repo, "m")
    git(repo, "worktree", "remove", "--force", str(done.path))
    open_one = worktrees.ensure(repo, "L1", "2", "main")
    work(open_one, "c.txt", "c\n")
    git(repo, "worktree", "remove", "--force", str(open_one.path))
    worktrees.tidy(repo, "L1")
    assert worktrees.branches(repo, "L1") == ["loopdeck/L1/2"]

"""Git, read through GitPython: the repository at a glance (the monitor's git panel, resume's
list of uncommitted work) and the views of a parallel loop's worktrees (branches, worktrees,
what a branch changed, conflicts).

GitPython reads refs, the index, config and objects in Python and runs `git` for the rest
(diffs, untracked files, ahead/behind, the log). Every `git` it runs gets the same overrides
as `loop.repo.gitargv` puts on the command line, as `GIT_CONFIG_*` variables, so a
repository written by someone else runs none of its programs (fsmonitor, hooks); diffs are read
in raw form, which runs no external diff and no textconv. Each look opens the repository and
closes it, which ends the `git cat-file` helpers GitPython reads objects with: none outlives a
look (a monitor runs for days). What loopdeck writes (commits, merges, worktrees)
stays plain `git` argv (`loop.repo.gitstate`, `loop.repo.worktrees`). Never on the hook's
path: importing GitPython takes ~0.1-0.2 s.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from git import NULL_TREE, Diff, Git, Repo
from git import Commit as GitCommit
from git.exc import GitError as GitPythonError
from git.exc import InvalidGitRepositoryError, NoSuchPathError
from git.refs.symbolic import SymbolicReference

from loop.repo.gitargv import git_program, safe_config_env
from loop.repo.gitstate import LOOK_ENV, Commit, GitError, GitStatus, forget_repos, is_ours, toplevel

LOGS_KEPT = 16
_logs: dict[tuple[Path, str, int], tuple[Commit, ...]] = {}
_log_lock = threading.Lock()


class SafeGit(Git):
    """GitPython's `git`, run as loopdeck runs it: the `git` on PATH found once (`git_program`),
    the overrides of `SAFE_CONFIG` in its environment, no optional lock, messages in C."""

    def __init__(self, working_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(working_dir)
        self.update_environment(**safe_config_env(), **LOOK_ENV)

    @property  # read by every command GitPython runs
    def GIT_PYTHON_GIT_EXECUTABLE(self) -> str:  # type: ignore[override]
        return git_program()


class SafeRepo(Repo):
    """A `Repo` whose every `git` is a `SafeGit` (its `cat-file` helpers included)."""

    GitCommandWrapperType = SafeGit


def open_repo(root: Path) -> Repo:
    """The repository whose working tree is `root` (its top: a worktree's own folder for a
    task). Close it after use (`with open_repo(…) as repo`). GitError when `root` is not one."""
    try:
        return SafeRepo(root)
    except (InvalidGitRepositoryError, NoSuchPathError, GitPythonError, OSError) as exc:
        raise GitError(f"{root} is not a git repository ({type(exc).__name__})") from None


def forget() -> None:
    """Forget the logs read and the working trees found (a test that wants a clean slate)."""
    forget_repos()
    with _log_lock:
        _logs.clear()


def _recent(repo: Repo, top: Path, oid: str, count: int) -> tuple[Commit, ...]:
    """The last `count` commits from `oid`: one `git rev-list`, asked again only when HEAD moves."""
    key = (top, oid, count)
    with _log_lock:
        known = _logs.get(key)
    if known is not None:
        return known
    found = tuple(
        Commit(c.hexsha[:8], _subject(c.message), _minutes(c.committed_datetime))
        for c in repo.iter_commits(oid, max_count=count)
    )
    with _log_lock:
        if len(_logs) >= LOGS_KEPT:
            _logs.clear()
        _logs[key] = found
    return found


def _subject(message: str | bytes) -> str:
    """The commit's subject as `git log --format=%s` gives it: its first paragraph on one line."""
    text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
    return " ".join(text.strip().split("\n\n", 1)[0].split("\n")).strip()


def _minutes(when: datetime) -> str:
    """`2026-01-09T10:30+02:00`: the committer's time to the minute, in the committer's zone."""
    return when.isoformat(timespec="minutes")


def _ahead_behind(repo: Repo) -> tuple[int | None, int | None]:
    """Commits on the branch and not on its upstream, and the other way round; None, None with
    no upstream (or one not fetched yet)."""
    if repo.head.is_detached:
        return None, None
    upstream = repo.active_branch.tracking_branch()
    if upstream is None or not upstream.is_valid():
        return None, None
    counts = repo.git.rev_list("--left-right", "--count", f"HEAD...{upstream.path}", "--").split()
    try:
        return int(counts[0]), int(counts[1])
    except (IndexError, ValueError):
        return None, None


def conflicts(diffs: Iterable[Diff]) -> list[str]:
    """The paths unmerged in the index (a merge or rebase stopped on them), from the working tree
    against the index (`repo.index.diff(None)`, where git marks them `U`): one process, where
    GitPython's own reading of the index takes ~40 ms for 2,000 files."""
    return sorted({d.a_path or d.b_path or "" for d in diffs if d.change_type == "U"} - {""})


def _head(repo: Repo) -> str | None:
    """HEAD's commit id, None before the first commit: read from the refs, no process."""
    try:
        return SymbolicReference.dereference_recursive(repo, "HEAD")
    except ValueError:
        return None


def status(root: Path, commits: int = 5) -> GitStatus:
    """The repo at a glance; `error` says why when there is none (never raises). Three `git`
    processes (the index against HEAD, the working tree against the index, the untracked files),
    one `git rev-list` for an upstream, and one for the log when HEAD moved since the last look."""
    top = toplevel(root)
    if top is None:
        return GitStatus(None, None, error="not a git repository")
    try:
        with open_repo(top) as repo:
            return _status(repo, top, commits)
    except (GitError, GitPythonError, OSError, ValueError) as exc:
        forget_repos()
        said = str(exc).strip().splitlines()
        return GitStatus(None, None, error=f"git: {said[0] if said else type(exc).__name__}")


def _status(repo: Repo, top: Path, commits: int) -> GitStatus:
    oid = _head(repo)
    branch = None if repo.head.is_detached else repo.active_branch.name
    ahead, behind = _ahead_behind(repo) if oid else (None, None)
    codes: dict[str, list[str]] = {}  # path → [X, Y, the path it was renamed from]
    for diff in GitCommit(repo, bytes.fromhex(oid)).diff() if oid else repo.index.diff(NULL_TREE):
        path = diff.b_path or diff.a_path or ""
        kind = diff.change_type or "M"
        orig = diff.a_path if kind in "RC" and diff.a_path != path else ""
        codes.setdefault(path, [" ", " ", ""])[0::2] = [kind, orig or ""]
    worktree = repo.index.diff(None)
    unmerged = set(conflicts(worktree))
    for diff in worktree:
        path = diff.a_path or diff.b_path or ""
        codes.setdefault(path, [" ", " ", ""])[1] = diff.change_type or "M"
    staged = modified = untracked = 0
    changes: list[str] = []
    for path in sorted(codes.keys() | unmerged):
        if is_ours(path):
            continue
        x, y, orig = ("U", "U", "") if path in unmerged else codes[path]
        staged += x != " "
        modified += y != " "
        changes.append(f"{x}{y} {orig} -> {path}" if orig else f"{x}{y} {path}")
    for path in repo.untracked_files:
        if not is_ours(path):
            untracked += 1
            changes.append(f"?? {path}")
    recent = _recent(repo, top, oid, commits) if oid is not None and commits > 0 else ()
    return GitStatus(
        branch,
        oid[:8] if oid else None,
        staged,
        modified,
        untracked,
        recent,
        ahead,
        behind,
        tuple(changes[:50]),
    )

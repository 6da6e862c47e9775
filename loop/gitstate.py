"""Git, through GitPython: what changed (for the runner's progress check), and commits.

Never on the hook's path (GitPython costs ~100 ms to import). loopdeck never force-pushes,
never resets and never cleans: work is committed or left where it is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

LOOP_FILES = (":(exclude).claude/orchestrator-loop*", ":(exclude).claude/loopdeck", ":(exclude).claude/loops")
"""loopdeck's own files are not the work: they are never committed and never count as progress."""


def fingerprint(root: Path) -> str | None:
    """A digest of HEAD and the working tree's changes; None when `root` is not in a repo."""
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    try:
        head = repo.head.commit.hexsha if repo.head.is_valid() else "no-commits"
        status = repo.git.status("--porcelain", "--untracked-files=all", "--", ".", *LOOP_FILES)
        diff = repo.git.diff("HEAD", "--", ".", *LOOP_FILES) if repo.head.is_valid() else ""
    except git.GitCommandError:
        return None
    return hashlib.sha256(f"{head}\n{status}\n{diff}".encode()).hexdigest()


def _ours(path: str) -> bool:
    return path.startswith((".claude/orchestrator-loop", ".claude/loopdeck/", ".claude/loops/"))


def commit(root: Path, message: str) -> str | None:
    """Commit every change but loopdeck's own files; the new sha, or None when nothing changed.

    The changed paths are listed and staged by name: an exclude pathspec that names an ignored
    folder makes `git add` fail, and loopdeck's folders usually are ignored.
    """
    import git

    repo = git.Repo(root, search_parent_directories=True)
    status = repo.git.status("--porcelain", "-z", "--untracked-files=all")
    entries = [e for e in status.split("\0") if e]
    paths: list[str] = []
    skip_next = False
    for entry in entries:
        if skip_next:  # the source path of a rename
            skip_next = False
            continue
        code, path = entry[:2], entry[3:]
        skip_next = "R" in code or "C" in code
        if not _ours(path):
            paths.append(path)
    if not paths:
        return None
    repo.git.add("-A", "--", *paths)
    if repo.head.is_valid() and not repo.index.diff("HEAD"):
        return None
    return str(repo.index.commit(message).hexsha)


@dataclass(frozen=True)
class Commit:
    sha: str
    summary: str
    when: str


@dataclass(frozen=True)
class GitStatus:
    branch: str | None
    head: str | None
    staged: int = 0
    modified: int = 0
    untracked: int = 0
    commits: tuple[Commit, ...] = ()
    ahead: int | None = None
    behind: int | None = None
    changes: tuple[str, ...] = ()
    """`git status --short` lines (the first 50), for the resume prompt."""
    error: str | None = None


def status(root: Path, commits: int = 5) -> GitStatus:
    """The repo at a glance; `error` says why when there is none (never raises)."""
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return GitStatus(None, None, error="not a git repository")
    try:
        branch = None if repo.head.is_detached else repo.active_branch.name
        valid = repo.head.is_valid()
        head = repo.head.commit.hexsha[:8] if valid else None
        porcelain = repo.git.status("--porcelain", "--untracked-files=all")
        staged = modified = untracked = 0
        lines = [line for line in porcelain.splitlines() if line and not _ours(line[3:])]
        for line in lines:
            x, y = line[0], line[1]
            if x == "?":
                untracked += 1
                continue
            staged += x not in (" ", "?")
            modified += y not in (" ", "?")
        recent = tuple(
            Commit(
                c.hexsha[:8],
                c.summary if isinstance(c.summary, str) else c.summary.decode(),
                c.committed_datetime.isoformat(timespec="minutes"),
            )
            for c in (repo.iter_commits(max_count=commits) if valid else [])
        )
        ahead = behind = None
        if branch is not None and valid:
            tracking = repo.active_branch.tracking_branch()
            if tracking is not None:
                counts = repo.git.rev_list("--left-right", "--count", f"{tracking.name}...HEAD").split()
                behind, ahead = int(counts[0]), int(counts[1])
        return GitStatus(branch, head, staged, modified, untracked, recent, ahead, behind, tuple(lines[:50]))
    except (git.GitCommandError, ValueError, TypeError) as exc:
        return GitStatus(None, None, error=f"git: {exc}".splitlines()[0])

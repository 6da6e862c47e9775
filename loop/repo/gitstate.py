"""Git, through GitPython: what changed (for the runner's progress check), and commits.

Never on the hook's path (GitPython costs ~100 ms to import). loopdeck never force-pushes,
never resets and never cleans: work is committed or left where it is.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import git

LOOP_FILES = (
    ":(exclude).claude/orchestrator-loop*",
    ":(exclude).claude/loopdeck",
    ":(exclude).claude/loops",
    ":(exclude).loopdeck",
)
"""loopdeck's own files are not the work: they are never committed and never count as progress."""


REPO_CACHE_SIZE = 4
"""Repos kept open between fingerprints (a runner drives one workspace; tests open many)."""

_repos: OrderedDict[Path, git.Repo] = OrderedDict()
_repos_lock = threading.Lock()


def _repo(root: Path) -> git.Repo | None:
    """The repo at or above `root`, opened once and reused: the runner asks twice an iteration,
    and a new `Repo` each time was half of the runner's own time. The least recently used is
    closed (its `git cat-file` helpers end) when more than `REPO_CACHE_SIZE` are open."""
    import git

    key = root.resolve()
    with _repos_lock:
        repo = _repos.get(key)
        if repo is not None:
            _repos.move_to_end(key)
            return repo
    try:
        repo = git.Repo(key, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    with _repos_lock:
        _repos[key] = repo
        while len(_repos) > REPO_CACHE_SIZE:
            _key, old = _repos.popitem(last=False)
            old.close()
    return repo


def forget_repos() -> None:
    """Close every cached repo (a repo moved or deleted under us, or a test that wants a clean
    slate)."""
    with _repos_lock:
        while _repos:
            _key, repo = _repos.popitem()
            repo.close()


def fingerprint(root: Path) -> str | None:
    """A digest of HEAD and the working tree's changes; None when `root` is not in a repo.

    One `git status --porcelain=v2 --branch` process: its header holds HEAD's oid, its entries
    the index and HEAD blob ids of every change. A file edited again while already modified
    keeps its entry, so each changed path's size and mtime (a `stat`, no process) join the
    digest: the agent editing the same file again is still progress.
    """
    import git

    repo = _repo(root)
    if repo is None:
        return None
    try:
        out = repo.git.status(
            "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--", ".", *LOOP_FILES
        )
    except git.GitCommandError:
        forget_repos()  # the repo may be gone: open it afresh next time
        return None
    digest = hashlib.sha256(out.encode())
    base = Path(repo.working_dir)
    for path in _changed_paths(out):
        try:
            st = (base / path).lstat()
        except OSError:
            digest.update(f"\0{path}\0-".encode())
            continue
        digest.update(f"\0{path}\0{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def _changed_paths(porcelain_v2_z: str) -> list[str]:
    """The paths of `git status --porcelain=v2 -z` entries (headers and rename sources left out)."""
    paths: list[str] = []
    entries = porcelain_v2_z.split("\0")
    skip_next = False
    for entry in entries:
        if skip_next:  # the original path of a rename or copy
            skip_next = False
            continue
        if not entry or entry.startswith("#"):
            continue
        kind = entry[0]
        if kind == "1":
            paths.append(entry.split(" ", 8)[-1])
        elif kind == "2":
            paths.append(entry.split(" ", 9)[-1])
            skip_next = True
        elif kind == "u":
            paths.append(entry.split(" ", 10)[-1])
        elif kind in "?!":
            paths.append(entry[2:])
    return paths


OWN_PATHS = (
    ".claude/orchestrator-loop",
    ".claude/loopdeck/",
    ".claude/loops/",
    ".loopdeck/",
    # what `loopdeck install` writes: personal settings (machine paths) and their backups, and
    # the slash commands, which a person commits on purpose if at all
    ".claude/settings.local.json",
    ".claude/settings.json.bak-",
    ".claude/commands/orchestrator-loop.md",
    ".claude/commands/loop-status.md",
    ".claude/commands/loop-pause.md",
    ".claude/commands/loop-cancel.md",
)
"""The starts of the paths (from the workspace) that are loopdeck's own files, not the work."""


def _ours(path: str) -> bool:
    """Is `path` (as git names it, from the top of the repository) one of loopdeck's files, in
    the workspace or in a loop's folder below it (`service/.claude/…`)?"""
    path = path.strip('"')
    if path.startswith(OWN_PATHS):
        return True
    for folder in ("/.claude/", "/.loopdeck/"):
        at = path.find(folder)
        while at != -1:
            if path[at + 1 :].startswith(OWN_PATHS):
                return True
            at = path.find(folder, at + 1)
    return False


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
    if missing_identity(root):
        # Git would make one up from the login and host name (GitPython), or refuse (git):
        # loopdeck's commits say who made them instead; the runner tells the person once.
        actor = git.Actor(*STAND_IN)
        return str(repo.index.commit(message, author=actor, committer=actor).hexsha)
    return str(repo.index.commit(message).hexsha)


STAND_IN = ("loopdeck", "loopdeck@localhost")
"""Who loopdeck's commits are made as in a repository where git has no identity."""

IDENTITY_HELP = 'git config --global user.name "Your Name" && git config --global user.email you@example.com'
"""How a person gives git an identity (a repository's own: the same without --global)."""


def missing_identity(root: Path) -> bool:
    """Does git have no author name or e-mail for commits in `root` (no `user.name` /
    `user.email` in any of its config files, none in the environment)? A fresh machine or a
    container."""
    import os

    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return False
    with repo.config_reader() as config:
        name = config.get_value("user", "name", default="")
        email = config.get_value("user", "email", default="")
    name = os.environ.get("GIT_AUTHOR_NAME") or name
    email = os.environ.get("GIT_AUTHOR_EMAIL") or os.environ.get("EMAIL") or email
    return not (str(name).strip() and str(email).strip())


def stash(root: Path, message: str) -> str | None:
    """Stash every change but loopdeck's own files (untracked ones too) under `message`; the
    stash's ref, or None when nothing changed. Named, so a person finds it in `git stash list`."""
    import git

    repo = git.Repo(root, search_parent_directories=True)
    status = repo.git.status("--porcelain", "-z", "--untracked-files=all")
    paths: list[str] = []
    skip_next = False
    for entry in (e for e in status.split("\0") if e):
        if skip_next:
            skip_next = False
            continue
        code, path = entry[:2], entry[3:]
        skip_next = "R" in code or "C" in code
        if not _ours(path):
            paths.append(path)
    if not paths or not repo.head.is_valid():
        return None
    repo.git.stash("push", "--include-untracked", "-m", message, "--", *paths)
    return str(repo.git.rev_parse("stash@{0}"))


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

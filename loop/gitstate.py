"""Git, through GitPython: what changed (for the runner's progress check), and commits.

Never on the hook's path (GitPython costs ~100 ms to import). loopdeck never force-pushes,
never resets and never cleans: work is committed or left where it is.
"""

from __future__ import annotations

import hashlib
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

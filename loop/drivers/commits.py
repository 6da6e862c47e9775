"""Committing a driver's work: the runner's turn (never over a merge left unresolved), a
parallel worker's own files (every other change left alone). A repository problem never loses
the run: it is journaled as a warning and the loop goes on."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

from loop.drivers.session import Session
from loop.repo.gitargv import NO_DIFF_PROGRAMS, git_argv


class Commits:
    """The commits a run makes, counted for its summary."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.identity_said = False
        """Whether this run told the person git has no identity for its commits (said once)."""

    def turn(self, n: int) -> tuple[str, ...]:
        """Commit the iteration's work; never over a merge left unresolved (the files with
        conflicts are returned, and the engine makes the loop wait for a person)."""
        # Here, not at the top: loop.repo.worktrees loads GitPython, ~95 ms (`-X importtime`)
        # that every run without --commit would pay at start-up.
        from loop.repo import gitstate, worktrees

        root = self.session.ws.root
        try:
            if worktrees.is_repo(root):
                unresolved = tuple(worktrees.unresolved(root))
                if unresolved:
                    return unresolved
        except Exception:  # not a repository git can read: the commit below says why
            pass
        if not self.identity_said:
            self.identity_said = True
            with contextlib.suppress(Exception):
                if gitstate.missing_identity(root):
                    self.session.warn(
                        f"git has no identity (user.name, user.email) in {root}: "
                        f"loopdeck commits as {gitstate.STAND_IN[0]} <{gitstate.STAND_IN[1]}>; "
                        f"to commit as you: {gitstate.IDENTITY_HELP}",
                        n,
                    )
        try:
            sha = gitstate.commit(root, f"loopdeck: iteration {n}")
        except Exception as exc:  # a repo problem must not lose the run: say it and go on
            self.session.warn(f"commit failed: {exc}", n)
            return ()
        if sha:
            self.session.tally.commits.append(sha)
            self.session.event("commit", n, {"sha": sha})
        return ()

    def files(self, files: tuple[str, ...], message: str, data: dict[str, str]) -> None:
        """Commit a worker's own files (`commit_files`), journaled with `data`."""
        try:
            sha = commit_files(self.session.ws.root, files, message)
        except Exception as exc:  # a repo problem must not lose the run
            self.session.warn(f"commit failed: {exc}")
            return
        if sha:
            self.session.tally.commits.append(sha)
            self.session.event("commit", None, {"sha": sha, **data})


def commit_files(root: Path, files: tuple[str, ...], message: str) -> str | None:
    """Commit the given files only (a worker's own), leaving every other change alone; the
    new sha, or None when they did not change."""
    files = tuple(f for f in files if (root / f).exists() or _tracked(root, f))
    if not files:
        return None
    subprocess.run(
        git_argv("add", "-A", "--", *files, literal=True), cwd=root, check=True, capture_output=True
    )
    staged = subprocess.run(
        git_argv("diff", *NO_DIFF_PROGRAMS, "--cached", "--quiet", "--", *files, literal=True),
        cwd=root,
        capture_output=True,
    )
    if staged.returncode == 0:
        return None
    subprocess.run(
        git_argv("commit", "-q", "--no-verify", "-m", message, "--only", "--", *files, literal=True),
        cwd=root,
        check=True,
        capture_output=True,
    )
    head = subprocess.run(git_argv("rev-parse", "HEAD"), cwd=root, check=True, capture_output=True, text=True)
    return head.stdout.strip() or None


def _tracked(root: Path, name: str) -> bool:
    found = subprocess.run(
        git_argv("ls-files", "--error-unmatch", "--", name, literal=True), cwd=root, capture_output=True
    )
    return found.returncode == 0

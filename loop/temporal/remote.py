"""The shared git remote, as a worker machine uses it: a cached clone per remote, a worktree per
turn, and pushes that can never do a task twice.

Why leases: a worker that froze (a laptop lid closed, a preempted VM) is given up on by the
server after its heartbeat timeout and its turn goes to another worker, but the frozen one may
wake and push. Every push here names the sha it expects the branch to have
(`--force-with-lease=refs/heads/B:<sha>`): a task's branch is created only if absent (an empty
expectation), a turn's push lands only on the sha the turn started from, a merge only on the
loop's branch as it was merged. A late push is refused by the remote, whatever the pusher
believes.

The cache (`<work dir>/repos/<digest>.git`, a bare repository) is shared by every worker
process of the machine: fetches and worktree changes take a file lock. Argv only, no hooks of
the project run, nothing here reaches a shell.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from loop.core.errors import LoopdeckError
from loop.repo.gitargv import git_argv
from loop.repo.worktrees import safe_name

GIT_TIMEOUT_S = 300.0
TRAILER = "Loopdeck-Turn"
"""The commit trailer naming the turn a commit on a task's branch holds (its key)."""
FACTS = "Loopdeck-Facts"
"""The trailer holding that turn's facts (JSON, redacted): a retry of the turn returns them
instead of running the agent again."""


class GitProblem(LoopdeckError):
    pass


def git(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = git_argv(*args)
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitProblem(f"git {args[0]}: {exc}") from None
    if check and done.returncode != 0:
        raise GitProblem(f"git {' '.join(args[:2])}: {(done.stderr or done.stdout).strip()[-500:]}")
    return done


_URL = re.compile(r"(?:https|ssh|git|file)://(?:[^-/@][^/@]*@)?[^-/@][^/@]*(?:/.*)?|file:///.*")
"""Schemes in lower case only: git takes `FILE://` for a helper program `git-remote-FILE`."""
_SCP = re.compile(r"(?:[A-Za-z0-9_.+][A-Za-z0-9_.+-]*@)?[A-Za-z0-9_.][A-Za-z0-9_.-]*:(?!//).*")
REMOTES = "an https://, ssh://, git:// or file:// URL, user@host:path, or an absolute path"


def remote_problem(remote: str) -> str | None:
    """Why `remote` is not a git remote a worker may fetch from and push to, or None. It comes
    from whoever started the workflow: git must read it as a place, never as an option
    (`--upload-pack=…` runs a command) nor as a transport that runs one (`ext::`)."""
    if not remote or remote.startswith("-"):
        return f"the remote {remote!r} is not a place: {REMOTES}"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in remote):
        return f"the remote {remote!r} has a control character in it: {REMOTES}"
    if remote.startswith("/") or _URL.fullmatch(remote) or (_SCP.fullmatch(remote) and "::" not in remote):
        return None
    return f"the remote {remote!r} is not one git reaches without running a program: {REMOTES}"


def check_remote(remote: str) -> str:
    """`remote`, or GitProblem saying why it is refused."""
    problem = remote_problem(remote)
    if problem is not None:
        raise GitProblem(problem)
    return remote


def has_credentials(url: str) -> bool:
    """A remote URL with a user's password or token in it (`https://user:token@host/…`): it
    would travel in the workflow's history; credentials belong in each worker's git setup."""
    from loop.core.redact import redact

    if re.match(r"^[a-z][a-z0-9+.-]*://[^/@]*:[^/@]*@", url, re.IGNORECASE):
        return True  # user:password
    if re.match(r"^https?://[^/@]+@", url, re.IGNORECASE):
        return True  # a token as the user name (`https://ghp_…@github.com/…`): http needs none
    return redact(url) != url  # any other shape the redaction knows as a secret


class Cache:
    """A machine's clones of the shared remotes and the worktrees of its turns."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def repo(self, remote: str) -> Path:
        check_remote(remote)
        digest = hashlib.sha256(remote.encode()).hexdigest()[:16]
        path = self.root / "repos" / f"{digest}.git"
        with self.locked(path):
            if not (path / "HEAD").exists():
                path.mkdir(parents=True, exist_ok=True)
                git(path, "init", "--quiet", "--bare")
        return path

    @contextlib.contextmanager
    def locked(self, repo: Path) -> Iterator[None]:
        """One git change of the cache at a time, across the machine's worker processes."""
        lock = repo.with_suffix(".lock")
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def fetch(self, repo: Path, remote: str) -> None:
        with self.locked(repo):
            git(
                repo,
                "fetch",
                "--quiet",
                "--prune",
                "--",
                check_remote(remote),
                "+refs/heads/*:refs/remotes/origin/*",
            )

    def worktree(self, repo: Path, name: str, sha: str) -> Path:
        """A fresh worktree of `sha` (detached), for one turn, audit or merge."""
        path = self.root / "trees" / safe_name(name)
        with self.locked(repo):
            if path.exists():
                git(repo, "worktree", "remove", "--force", str(path), check=False)
                shutil.rmtree(path, ignore_errors=True)
                git(repo, "worktree", "prune", check=False)
            path.parent.mkdir(parents=True, exist_ok=True)
            git(repo, "worktree", "add", "--quiet", "--detach", str(path), sha)
        return path

    def drop(self, repo: Path, path: Path) -> None:
        with self.locked(repo):
            git(repo, "worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(path, ignore_errors=True)
            git(repo, "worktree", "prune", check=False)


def sha_of(repo: Path, ref: str) -> str | None:
    done = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return done.stdout.strip() or None if done.returncode == 0 else None


def tracking(branch: str) -> str:
    return f"refs/remotes/origin/{branch}"


def push(cwd: Path, remote: str, sha: str, branch: str, expect: str | None) -> bool:
    """Push `sha` to `branch` on the remote if, and only if, the branch is at `expect` there
    (None or "": only if it does not exist). False when the remote refused (the lease did not
    hold: someone else moved the branch first)."""
    ref = f"refs/heads/{branch}"
    done = git(
        cwd,
        "push",
        "--porcelain",
        f"--force-with-lease={ref}:{expect or ''}",
        "--",
        check_remote(remote),
        f"{sha}:{ref}",
        check=False,
    )
    if done.returncode == 0:
        return True
    said = done.stdout + done.stderr
    if "[rejected]" in said or "stale info" in said or "already exists" in said or "fetch first" in said:
        return False
    raise GitProblem(f"git push {branch}: {said.strip()[-500:]}")


def claim(cache: Cache, repo: Path, remote: str, branch: str, base: str) -> str:
    """The task's branch on the remote, created from `base` if absent (atomically: the remote
    refuses a second creation), and its sha. Every attempt goes on from what is there."""
    head = sha_of(repo, tracking(branch))
    if head is not None:
        return head
    if push(repo, remote, base, branch, None):
        cache.fetch(repo, remote)
        return base
    cache.fetch(repo, remote)  # someone created it first: go on from theirs
    head = sha_of(repo, tracking(branch))
    if head is None:
        raise GitProblem(f"the branch {branch} could neither be created nor read on the remote")
    return head


def message_of(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%B", sha).stdout


def record_of(repo: Path, sha: str, key: str) -> str | None:
    """The facts a commit records for the turn `key` (its trailers), None when the commit is
    not that turn's."""
    text = message_of(repo, sha)
    lines = text.splitlines()
    if f"{TRAILER}: {key}" not in lines:
        return None
    for line in lines:
        if line.startswith(f"{FACTS}: "):
            return line[len(FACTS) + 2 :]
    return None


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    return git(repo, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0

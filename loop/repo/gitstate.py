"""Git, as plain `git` processes: what changed (the runner's progress check) and commits.

The runner's look is one `git status` started as a turn ends and read later, beside the
runner's own work; a commit is four processes. This module imports no GitPython (~0.1-0.2 s to
import): the runner imports it on its first turn. Reading the repository for a person (the
monitor, resume, the worktree views) is `loop.repo.gitread`, through GitPython; the records it
fills are here. Never on the hook's path. loopdeck never force-pushes, never resets and never
cleans: work is committed or left where it is.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.repo.gitargv import NO_DIFF_PROGRAMS, git_argv
from loop.repo.gitargv import git_program as git_program

LOOP_FILES = (
    ":(exclude).claude/orchestrator-loop*",
    ":(exclude).claude/loopdeck",
    ":(exclude).claude/loops",
    ":(exclude).loopdeck",
)
"""loopdeck's own files are not the work: they are never committed and never count as progress."""

GIT_TIMEOUT_S = 120.0
LOOK_ENV = {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
"""A look takes no lock: `git status` would otherwise refresh the index under `index.lock`, and
an agent's own `git add` or `commit` at that moment would fail on it."""
COMMIT_FLAGS = ("-c", "commit.gpgsign=false")
"""loopdeck's commits ask for no key (the prefix of `git_argv` already runs no hook)."""


class GitError(Exception):
    """git could not answer (not a repository, a broken one, git missing): its first line."""


def _run(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None, literal: bool = False
) -> str:
    """`git ARGS` in `cwd`: its output (surrogate-escaped), GitError when it fails and `check`;
    `literal`: its paths are file names, never pathspec magic."""
    try:
        done = subprocess.run(
            git_argv(*args, literal=literal),
            cwd=cwd,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **LOOK_ENV, **(env or {})},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        raise GitError(said[0] if said else f"git {args[0]} exited {done.returncode}")
    return done.stdout.decode("utf-8", "surrogateescape")


TOPS_KEPT = 64
_tops: dict[Path, Path] = {}
_tops_lock = threading.Lock()


def toplevel(root: Path) -> Path | None:
    """The working tree `root` is in (at or above it), None outside git; asked of git once per
    folder (the runner looks twice an iteration)."""
    key = root.resolve()
    with _tops_lock:
        top = _tops.get(key)
    if top is not None:
        return top
    try:
        found = _run(key, "rev-parse", "--show-toplevel").strip()
    except GitError:
        return None
    if not found:  # inside .git itself, or a bare repository: no working tree
        return None
    top = Path(found)
    with _tops_lock:
        if len(_tops) >= TOPS_KEPT:
            _tops.clear()
        _tops[key] = top
    return top


def forget_repos() -> None:
    """Forget the working trees found (a repository moved or deleted under us, or a test that
    wants a clean slate)."""
    with _tops_lock:
        _tops.clear()


def fingerprint(root: Path) -> str | None:
    """A digest of HEAD and the working tree's changes; None when `root` is not in a repo.

    One `git status --porcelain=v2 --branch` process: its header holds HEAD's oid, its entries
    the index and HEAD blob ids of every change. A file edited again while already modified
    keeps its entry, so each changed path's size and mtime (a `stat`, no process) join the
    digest: the agent editing the same file again is still progress.
    """
    return Fingerprint(root).result()


class Fingerprint:
    """`fingerprint(root)`, its `git status` started now and read by `result()`: the runner
    starts it as a turn ends and does its own reading meanwhile (the journal, the state, the
    task sources), so the process runs beside that work instead of before it. What git sees is
    the same: nothing the runner writes in between is in the work tree git looks at (its own
    files are excluded). `close()` ends a look that is no longer wanted."""

    def __init__(self, root: Path) -> None:
        self.top = toplevel(root)
        self.proc: subprocess.Popen[bytes] | None = None
        self.done = False
        self.value: str | None = None
        self.head: str | None = None
        """HEAD's commit as the look found it ("" before the first commit), once read."""
        if self.top is None:
            self.done = True
            return
        argv = git_argv(
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--",
            ".",
        )
        try:
            self.proc = subprocess.Popen(
                [*argv, *LOOP_FILES],
                cwd=self.top,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **LOOK_ENV},
            )
        except OSError:
            self._failed()

    def result(self) -> str | None:
        if self.done:
            return self.value
        self.done = True
        assert self.proc is not None and self.top is not None
        try:
            out, _err = self.proc.communicate(timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.close()
            self._failed()
            return None
        if self.proc.returncode != 0:
            self._failed()
            return None
        text = out.decode("utf-8", "surrogateescape")
        oid = next((e[len("# branch.oid ") :] for e in text.split("\0") if e.startswith("# branch.oid ")), "")
        self.head = "" if oid.startswith("(") else oid
        digest = hashlib.sha256(out)
        for path in _changed_paths(text):
            try:
                st = (self.top / path).lstat()
            except OSError:
                digest.update(f"\0{path}\0-".encode("utf-8", "surrogateescape"))
                continue
            digest.update(f"\0{path}\0{st.st_size}:{st.st_mtime_ns}".encode("utf-8", "surrogateescape"))
        self.value = digest.hexdigest()
        return self.value

    def close(self) -> None:
        """End the look (killed if it still runs); its answer, if not read yet, is None."""
        self.done = True
        if self.proc is not None and self.proc.returncode is None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.communicate()

    def _failed(self) -> None:
        self.done = True
        self.value = None
        forget_repos()  # the repo may be gone: find it afresh next time


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


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's empty tree: what a repository without a commit is compared against."""
MAX_PATHS = 50
MAX_COUNTED_BYTES = 1 << 20
"""A new file untracked by git has its lines counted up to this size (larger: none counted)."""


def changes(root: Path, base: str) -> dict[str, Any] | None:
    """What the work changed since commit `base` ("" for none), uncommitted work included:
    files created, modified and deleted, lines added and removed, and the paths (at most 50).
    loopdeck's own files left out. None outside git or when git cannot say."""
    top = toplevel(root)
    if top is None:
        return None
    since = base or EMPTY_TREE
    scope = ("--", ".", *LOOP_FILES)
    try:
        numstat = _run(top, "diff", *NO_DIFF_PROGRAMS, "--no-renames", "--numstat", "-z", since, *scope)
        names = _run(top, "diff", *NO_DIFF_PROGRAMS, "--no-renames", "--name-status", "-z", since, *scope)
        new = _run(top, "ls-files", "--others", "--exclude-standard", "-z", *scope)
    except GitError:
        return None
    counts = {"created": 0, "modified": 0, "deleted": 0, "added": 0, "removed": 0}
    paths: list[str] = []
    fields = names.split("\0")
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        if not status or is_ours(path):
            continue
        key = {"A": "created", "D": "deleted"}.get(status[0], "modified")
        counts[key] += 1
        paths.append(path)
    for entry in numstat.split("\0"):
        added, _tab, rest = entry.partition("\t")
        removed, _tab, path = rest.partition("\t")
        if path and not is_ours(path):
            counts["added"] += int(added) if added.isdigit() else 0
            counts["removed"] += int(removed) if removed.isdigit() else 0
    for path in (p for p in new.split("\0") if p and not is_ours(p)):
        counts["created"] += 1
        paths.append(path)
        counts["added"] += _lines(top / path)
    return {**counts, "paths": sorted(paths)[:MAX_PATHS]}


def _lines(path: Path) -> int:
    """A new text file's lines (0 for a large or binary one, or one gone)."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_COUNTED_BYTES:
            return 0
        data = path.read_bytes()
    except OSError:
        return 0
    if b"\0" in data[:8192]:
        return 0
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def clean(root: Path) -> bool | None:
    """Is the work all committed (loopdeck's own files left out)? None outside git."""
    top = toplevel(root)
    if top is None:
        return None
    try:
        return not _work_paths(top)
    except GitError:
        return None


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


def is_ours(path: str) -> bool:
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


def _work_paths(top: Path) -> list[str]:
    """The changed paths of the work (loopdeck's own files left out), as `git add` takes them."""
    status = _run(top, "status", "--porcelain", "-z", "--untracked-files=all")
    paths: list[str] = []
    skip_next = False
    for entry in (e for e in status.split("\0") if e):
        if skip_next:  # the source path of a rename
            skip_next = False
            continue
        code, path = entry[:2], entry[3:]
        skip_next = "R" in code or "C" in code
        if not is_ours(path):
            paths.append(path)
    return paths


def _identity(top: Path) -> tuple[str, ...]:
    """`-c user.name=… -c user.email=…` (`STAND_IN`) when git names nobody to commit as in the
    repository (a fresh machine, a container): loopdeck's commits then say who made them
    instead of failing, or of git making one up from the login and host name."""
    if not _missing(top):
        return ()
    return ("-c", f"user.name={STAND_IN[0]}", "-c", f"user.email={STAND_IN[1]}")


def _missing(top: Path) -> bool:
    """`missing_identity` in a working tree: one `git config` process."""
    out = _run(top, "config", "--get-regexp", r"^user\.(name|email)$", check=False)
    found = dict(line.partition(" ")[::2] for line in out.splitlines())
    name = os.environ.get("GIT_AUTHOR_NAME") or found.get("user.name", "")
    email = os.environ.get("GIT_AUTHOR_EMAIL") or os.environ.get("EMAIL") or found.get("user.email", "")
    return not (name.strip() and email.strip())


def _has_head(top: Path) -> bool:
    return bool(_run(top, "rev-parse", "--verify", "--quiet", "HEAD", check=False).strip())


def commit(root: Path, message: str) -> str | None:
    """Commit every change but loopdeck's own files; the new sha, or None when nothing changed.

    The changed paths are listed and staged by name: an exclude pathspec that names an ignored
    folder makes `git add` fail, and loopdeck's folders usually are ignored. Raises GitError
    when git refuses (not a repository, a conflict, a broken index).
    """
    top = toplevel(root)
    if top is None:
        raise GitError(f"{root} is not in a git repository")
    paths = _work_paths(top)
    if not paths:
        return None
    _run(top, "add", "-A", "--", *paths, literal=True)
    ident = _identity(top)
    done = subprocess.run(
        git_argv(*COMMIT_FLAGS, *ident, "commit", "--quiet", "--no-verify", "--no-edit", "-m", message),
        cwd=top,
        capture_output=True,
        timeout=GIT_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "LC_ALL": "C"},
    )
    if done.returncode != 0:
        staged = subprocess.run(
            git_argv("diff", *NO_DIFF_PROGRAMS, "--cached", "--quiet"),
            cwd=top,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
        if staged.returncode == 0 and _has_head(top):
            return None  # the changes staged were no change to HEAD (a file touched, a mode)
        said = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        raise GitError(said[0] if said else f"git commit exited {done.returncode}")
    return _run(top, "rev-parse", "HEAD").strip() or None


STAND_IN = ("loopdeck", "loopdeck@localhost")
"""Who loopdeck's commits are made as in a repository where git has no identity."""

IDENTITY_HELP = 'git config --global user.name "Your Name" && git config --global user.email you@example.com'
"""How a person gives git an identity (a repository's own: the same without --global)."""


def missing_identity(root: Path) -> bool:
    """Does git have no author name or e-mail for commits in `root` (no `user.name` /
    `user.email` in any of its config files, none in the environment)? A fresh machine or a
    container. False outside a repository."""
    top = toplevel(root)
    return top is not None and _missing(top)


def stash(root: Path, message: str) -> str | None:
    """Stash every change but loopdeck's own files (untracked ones too) under `message`; the
    stash's ref, or None when nothing changed. Named, so a person finds it in `git stash list`."""
    top = toplevel(root)
    if top is None:
        raise GitError(f"{root} is not in a git repository")
    paths = _work_paths(top)
    if not paths or not _has_head(top):
        return None
    ident = _identity(top)
    _run(
        top,
        *COMMIT_FLAGS,
        *ident,
        "stash",
        "push",
        "--include-untracked",
        "-m",
        message,
        "--",
        *paths,
        literal=True,
    )
    return _run(top, "rev-parse", "stash@{0}").strip()


@dataclass(frozen=True)
class Commit:
    """One commit as the monitor lists it (`loop.repo.gitread` reads them)."""

    sha: str
    summary: str
    when: str


@dataclass(frozen=True)
class GitStatus:
    """The repository at a glance, as `loop.repo.gitread.status` reads it: here, so that a
    view names it without importing GitPython."""

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

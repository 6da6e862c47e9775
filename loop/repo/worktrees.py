"""A task is a branch: each parallel worker works in its own git worktree, and approved branches
merge into the loop's branch one at a time.

Why worktrees: workers sharing one working tree can only be kept apart by hoping they touch the
files they declared; in a worktree of its own a worker writes what it writes, its diff says
what it did (files outside its task included), an audit judges that diff, and a conflict is a
merge that failed, which can be handed back as rework instead of corrupting a shared file.

The branch `loopdeck/<loop>/<task>` is created atomically (`git branch` refuses an existing
name): a retried task, a restarted runner or a worker on another machine finds the branch and
goes on from it, so a task is never begun twice. The worktrees live in the workspace under
`.loopdeck/worktrees/`, which is added to the repository's local exclude file (never to a
file the project commits). loopdeck's own commits run no hooks of the project (`--no-verify`,
no hooks path) and name loopdeck when the repository has no identity. Argv only: nothing here
reaches a shell; task ids become branch names through a strict filter.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from git import Head, Repo
from git.exc import GitCommandError
from git.exc import GitError as GitPythonError

from loop.core.errors import LoopdeckError
from loop.core.redact import redact
from loop.repo.gitargv import NO_DIFF_PROGRAMS, git_argv
from loop.repo.gitread import conflicts, open_repo
from loop.repo.gitstate import GitError

GIT_TIMEOUT_S = 120.0
BRANCH_PREFIX = "loopdeck"
FOLDER = Path(".loopdeck") / "worktrees"
"""Not under `.claude/`: Claude Code guards that folder, and refuses an agent's writes there."""
EXCLUDED = "/.loopdeck/"
"""What the local exclude file gets: the worktrees' folder."""
HUNK_CHARS = 6000
"""How much of the conflicting hunks goes back to the worker as feedback."""


class GitFailed(LoopdeckError):
    pass


def run_git(
    root: Path, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """git (`git_argv`: no program of the repository runs) in `root`, as text. With `check`, a
    failure is GitFailed: the command and what git said, redacted (a push may say a URL's
    token), in one line. The one runner the landing, the train, pull requests and worktree
    setup share."""
    try:
        argv = git_argv(*args)
        done = subprocess.run(
            argv, cwd=root, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired, UnicodeDecodeError) as exc:  # output not UTF-8
        raise GitFailed(f"git {args[0]} in {root}: {exc}") from None
    if check and done.returncode != 0:
        said = redact((done.stderr or done.stdout).strip())[-500:]
        raise GitFailed(f"git {' '.join(args[:2])} in {root}: {said}")
    return done


@contextmanager
def _reading(root: Path) -> Iterator[Repo]:
    """The repository at `root`, read through GitPython (`loop.repo.gitread`: no program of the
    repository runs); what git could not answer as GitFailed."""
    try:
        with open_repo(root) as repo:
            yield repo
    except (GitError, GitPythonError, ValueError) as exc:
        said = str(exc).strip().splitlines()
        raise GitFailed(f"git in {root}: {said[-1][-500:] if said else type(exc).__name__}") from None


def _identity(root: Path) -> list[str]:
    """`-c user.name=… -c user.email=…` when the repository has no identity of its own (a fresh
    machine, a container): loopdeck's commits then say who made them instead of failing."""
    name = run_git(root, "config", "user.name", check=False).stdout.strip()
    email = run_git(root, "config", "user.email", check=False).stdout.strip()
    found: list[str] = []
    if not name:
        found += ["-c", "user.name=loopdeck"]
    if not email:
        found += ["-c", "user.email=loopdeck@localhost"]
    return found


def is_repo(root: Path) -> bool:
    """Is `root` the top of a git working tree (not a folder inside one)?"""
    try:
        with _reading(root) as repo:
            top = repo.working_tree_dir
    except GitFailed:
        return False
    return top is not None and Path(top).resolve() == root.resolve()


def current_branch(root: Path) -> str | None:
    """The branch checked out in the workspace (the loop's branch), None when detached."""
    try:
        with _reading(root) as repo:
            return None if repo.head.is_detached else repo.active_branch.name
    except (GitFailed, TypeError):
        return None


def head(root: Path, ref: str = "HEAD") -> str:
    return run_git(root, "rev-parse", "--verify", f"{ref}^{{commit}}").stdout.strip()


def safe_name(text: str) -> str:
    """A piece of a branch or folder name from a task id or a loop's start: letters, digits,
    `.`, `_` and `-` only, never a leading dot or dash, never empty."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-")[:60] or "x"
    return name.replace("..", ".")


def loop_id(started_at: str) -> str:
    """The loop's short name in branch names: its start, `20261126T120000`."""
    return safe_name(re.sub(r"[-:]|\+00:00$", "", started_at)) or "loop"


def exclude(root: Path) -> None:
    """Keep loopdeck's private folder (the worktrees) out of `git status`, in the repository's
    own local exclude file: nothing the project commits is changed."""
    with _reading(root) as repo:
        info = Path(repo.common_dir) / "info" / "exclude"
    try:
        text = info.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    if EXCLUDED in text.splitlines():
        return
    info.parent.mkdir(parents=True, exist_ok=True)
    with info.open("a", encoding="utf-8") as f:
        f.write(("" if not text or text.endswith("\n") else "\n") + EXCLUDED + "\n")


@dataclass(frozen=True)
class Worktree:
    path: Path
    branch: str
    base: str
    """The commit the branch was created from (what its diff is measured against)."""


def branch_for(loop: str, task: str) -> str:
    return f"{BRANCH_PREFIX}/{safe_name(loop)}/{safe_name(task)}"


def _listed(root: Path) -> dict[Path, str | None]:
    """The repository's worktrees: path → branch (None when detached). GitPython has no view of
    worktrees: `git worktree list --porcelain`, read here."""
    with _reading(root) as repo:
        out = repo.git.worktree("list", "--porcelain")
    found: dict[Path, str | None] = {}
    path: Path | None = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree ") :]).resolve()
            found[path] = None
        elif line.startswith("branch ") and path is not None:
            found[path] = line[len("branch refs/heads/") :]
    return found


def ensure(root: Path, loop: str, task: str, base_ref: str) -> Worktree:
    """The task's worktree on its branch, made if missing and reused if there: the branch is
    created once (from `base_ref`, the loop's branch), so every later attempt continues from
    what is on it."""
    branch = branch_for(loop, task)
    path = (root / FOLDER / safe_name(loop) / safe_name(task)).resolve()
    exclude(root)
    run_git(root, "branch", branch, base_ref, check=False)  # refused when it exists: then go on from it
    base = run_git(root, "merge-base", branch, base_ref).stdout.strip()
    listed = _listed(root)
    if listed.get(path) == branch and (path / ".git").exists():
        return Worktree(path, branch, base)
    if path in listed:  # registered but broken (its folder deleted), or on another branch
        run_git(root, "worktree", "remove", "--force", str(path), check=False)
        run_git(root, "worktree", "prune")
    holder = next((p for p, b in _listed(root).items() if b == branch and p != root.resolve()), None)
    if holder is not None:  # the branch is checked out in a stale worktree elsewhere
        run_git(root, "worktree", "remove", "--force", str(holder), check=False)
        run_git(root, "worktree", "prune")
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(root, "worktree", "add", "--quiet", str(path), branch)
    return Worktree(path, branch, base)


def commit_all(wt: Worktree, message: str) -> str | None:
    """Commit everything the worker changed in its worktree (what the project ignores aside);
    the new sha, or None when nothing changed. A merge the worker was resolving is concluded here
    only when no conflict is left (`unresolved` says which are)."""
    root = wt.path
    run_git(root, "add", "-A")  # loopdeck's own files live in the workspace, not in a task's worktree
    merging = _merging(root)
    staged = run_git(root, "diff", *NO_DIFF_PROGRAMS, "--cached", "--quiet", check=False).returncode != 0
    if not staged and not merging:
        return None
    run_git(root, *_identity(root), "commit", "--quiet", "--no-verify", "--allow-empty", "-m", message)
    return head(root)


def _merging(root: Path) -> bool:
    return _merge_head(root) is not None


def _merge_head(root: Path) -> str | None:
    """The commit a merge under way brings in: MERGE_HEAD in the worktree's own git folder."""
    with _reading(root) as repo:
        path = Path(repo.git_dir) / "MERGE_HEAD"
    try:
        return path.read_text(encoding="ascii", errors="replace").split()[0]
    except (OSError, IndexError):
        return None


_MARKERS = ("<<<<<<< ", ">>>>>>> ")


def _marked(path: Path) -> bool:
    """Does the file still hold a conflict's markers?"""
    try:
        with path.open("rb") as f:
            for line in f:
                if line.startswith((b"<<<<<<< ", b">>>>>>> ")) or line.rstrip(b"\r\n") == b"=======":
                    return True
    except OSError:
        return False
    return False


def unresolved(root: Path) -> list[str]:
    """Files with merge conflicts not resolved: unmerged in the index and still holding the
    conflict's markers (a file fixed but not staged yet is resolved: the next commit stages
    it), or holding markers in a merge under way."""
    with _reading(root) as repo:
        listed = conflicts(repo.index.diff(None))
        merging = (Path(repo.git_dir) / "MERGE_HEAD").exists()
        marked = repo.git.diff(*NO_DIFF_PROGRAMS, "--check", with_exceptions=False) if merging else ""
    files = {f for f in listed if _marked(root / f)}
    files |= {line.split(":", 1)[0] for line in marked.splitlines() if "conflict marker" in line}
    return sorted(files)


def changed_files(wt: Worktree, against: str | None = None) -> list[str]:
    """What the task's branch changed (its diff, as the audit judges it): since it left
    `against` (the loop's branch, whose later work a rework may have merged in), else since it
    was created."""
    with _reading(wt.path) as repo:
        tip = repo.head.commit
        bases = repo.merge_base(against, tip) if against else [repo.commit(wt.base)]
        if not bases:
            raise GitFailed(f"{wt.branch} and {against} have no commit in common")
        diffs = bases[0].diff(tip)
    return sorted({d.b_path or d.a_path or "" for d in diffs} - {""})


@dataclass(frozen=True)
class Merge:
    """What a merge into the loop's branch came to."""

    merged: bool
    sha: str | None = None
    conflicts: tuple[str, ...] = ()
    hunks: str = ""
    """The conflicting hunks, with their markers, for the worker that resolves them."""


def merge(root: Path, branch: str, message: str) -> Merge:
    """Merge `branch` into the branch checked out at `root`, without committing yet (the loop's
    verification runs on the merged tree first: `conclude` or `abandon`). A conflict is undone
    at once and reported with its hunks."""
    if _merging(root) or unresolved(root):
        raise GitFailed(
            f"a merge is already under way in {root}: {', '.join(unresolved(root)) or 'MERGE_HEAD'}"
        )
    done = run_git(root, *_identity(root), "merge", "--no-ff", "--no-commit", "--quiet", branch, check=False)
    if done.returncode == 0:
        return Merge(True)
    conflicts = tuple(unresolved(root))
    hunks = run_git(root, "diff", *NO_DIFF_PROGRAMS, check=False).stdout[:HUNK_CHARS]
    run_git(root, "merge", "--abort", check=False)
    if not conflicts:
        raise GitFailed(f"git merge {branch}: {(done.stderr or done.stdout).strip()[-500:]}")
    return Merge(False, conflicts=conflicts, hunks=hunks)


def rebase(wt: Worktree, onto: str) -> Merge:
    """Replay the task's branch onto the loop's branch in its worktree (the rebase strategy):
    the loop's branch can then move to it by a fast-forward. A conflict is undone at once and
    reported with its hunks, as a merge's would be."""
    done = run_git(wt.path, *_identity(wt.path), "rebase", "--quiet", onto, check=False)
    if done.returncode == 0:
        return Merge(True)
    conflicts = tuple(unresolved(wt.path))
    hunks = run_git(wt.path, "diff", *NO_DIFF_PROGRAMS, check=False).stdout[:HUNK_CHARS]
    run_git(wt.path, "rebase", "--abort", check=False)
    if not conflicts:
        raise GitFailed(f"git rebase {onto}: {(done.stderr or done.stdout).strip()[-500:]}")
    return Merge(False, conflicts=conflicts, hunks=hunks)


def fast_forward(root: Path, branch: str) -> str:
    """Move the branch checked out at `root` to `branch` (rebased onto it)."""
    run_git(root, "merge", "--ff-only", "--quiet", branch)
    return head(root)


def merging_branch(root: Path) -> str | None:
    """The commit a merge under way at `root` brings in (MERGE_HEAD), None when none is."""
    return _merge_head(root)


def conclude(root: Path, message: str) -> str:
    """Commit the merge under way (verification passed)."""
    run_git(root, *_identity(root), "commit", "--quiet", "--no-verify", "-m", message)
    return head(root)


def abandon(root: Path) -> None:
    """Undo the merge under way (verification failed): the loop's branch is as before it."""
    run_git(root, "merge", "--abort", check=False)


def take_in(wt: Worktree, loop_branch: str) -> list[str]:
    """Bring the loop's branch into the task's worktree for a rework: merged when it can be,
    else left mid-merge with the conflict markers in the files it returns, for the worker to
    resolve (the next `commit_all` concludes it)."""
    done = run_git(wt.path, *_identity(wt.path), "merge", "--no-edit", "--quiet", loop_branch, check=False)
    if done.returncode == 0:
        return []
    return unresolved(wt.path)


def branch_exists(root: Path, branch: str) -> bool:
    with _reading(root) as repo:
        return Head(repo, f"refs/heads/{branch}").is_valid()


def merged(root: Path, branch: str, into: str = "HEAD") -> bool:
    """Is everything on `branch` already in `into` (a merge done before a crash said so)?"""
    with _reading(root) as repo:
        head = Head(repo, f"refs/heads/{branch}")
        if not head.is_valid():
            return False
        try:
            return repo.is_ancestor(head.commit, repo.commit(into))
        except GitCommandError:
            return False


def remove(root: Path, wt_path: Path, branch: str | None = None) -> None:
    """Take a finished task's worktree away (its branch too, once merged: `-d` refuses
    otherwise)."""
    run_git(root, "worktree", "remove", "--force", str(wt_path), check=False)
    run_git(root, "worktree", "prune", check=False)
    if branch:
        run_git(root, "branch", "-d", branch, check=False)


def branches(root: Path, loop: str) -> list[str]:
    """This loop's task branches."""
    prefix = f"{BRANCH_PREFIX}/{safe_name(loop)}/"
    with _reading(root) as repo:
        return sorted(h.name for h in repo.branches if h.name.startswith(prefix))


def tidy(root: Path, loop: str) -> None:
    """Take away this loop's merged task branches that no worktree holds (a runner stopped
    between a merge and its clean-up): `-d` keeps any with work not merged."""
    held = set(_listed(root).values())
    for branch in branches(root, loop):
        if branch not in held and merged(root, branch):
            run_git(root, "branch", "-d", branch, check=False)


def leftovers(root: Path, loop: str) -> list[Path]:
    """This loop's worktrees the repository still lists (after a crash)."""
    folder = (root / FOLDER / safe_name(loop)).resolve()
    return [p for p in _listed(root) if str(p).startswith(str(folder) + os.sep)]


# --- the merge train's scratch worktree ------------------------------------------------------

TRAIN = ".train"
"""The merge train's scratch worktree, beside the tasks' (a task id never starts with a dot)."""


def scratch_path(root: Path, loop: str, lane: int = 1) -> Path:
    """The merge train's scratch worktree for checks in `lane` (1, 2, ...: one per check it
    may run at once)."""
    return (root / FOLDER / safe_name(loop) / (TRAIN if lane == 1 else f"{TRAIN}-{lane}")).resolve()


def scratch(root: Path, loop: str, at: str, lane: int = 1) -> Path:
    """The merge train's scratch worktree, detached at `at`, clean (what the project ignores,
    installed dependencies say, is kept): batches are merged and verified there, never on the
    loop's branch (which moves only by a fast-forward)."""
    path = scratch_path(root, loop, lane)
    exclude(root)
    if path in _listed(root) and (path / ".git").exists():
        run_git(path, "merge", "--abort", check=False)
        run_git(path, "checkout", "--quiet", "--detach", "--force", at)
        run_git(path, "clean", "-fdq")
        return path
    run_git(root, "worktree", "remove", "--force", str(path), check=False)
    run_git(root, "worktree", "prune", check=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(root, "worktree", "add", "--quiet", "--detach", str(path), at)
    return path


def tree(path: Path) -> str:
    """The id of the tree at HEAD: the files, whatever commit holds them."""
    return run_git(path, "rev-parse", "HEAD^{tree}").stdout.strip()


def reset_to(path: Path, at: str) -> None:
    """Put the scratch worktree back at `at`, clean."""
    run_git(path, "checkout", "--quiet", "--detach", "--force", at)
    run_git(path, "clean", "-fdq")


def merge_commit(path: Path, branch: str, message: str) -> Merge:
    """Merge `branch` into the scratch worktree's HEAD as a merge commit (its sha), or undo a
    conflict at once and report it with its hunks."""
    done = run_git(
        path,
        *_identity(path),
        "merge",
        "--no-ff",
        "--no-verify",
        "--quiet",
        "-m",
        message,
        branch,
        check=False,
    )
    if done.returncode == 0:
        return Merge(True, sha=head(path))
    conflicts = tuple(unresolved(path))
    said = _git_bytes(path, "diff", *NO_DIFF_PROGRAMS, check=False).stdout
    hunks = said.decode("utf-8", "replace")[:HUNK_CHARS]  # a file in any encoding
    run_git(path, "merge", "--abort", check=False)
    if not conflicts:
        raise GitFailed(f"git merge {branch}: {(done.stderr or done.stdout).strip()[-500:]}")
    return Merge(False, conflicts=conflicts, hunks=hunks)


def fork_point(root: Path, branch: str, onto: str) -> str:
    """The last commit `branch` and `onto` share (where the task's work left the loop's)."""
    return run_git(root, "merge-base", branch, onto).stdout.strip()


def landings(root: Path, until: str, count: int) -> list[tuple[str, str]]:
    """The last `count` commits on the first-parent line of `until` (the loop's branch: each a
    landing) and the one before them, oldest first: (sha, subject)."""
    out = run_git(
        root, "log", "--first-parent", "--reverse", "--format=%H %s", "-n", str(count + 1), until
    ).stdout
    return [(line[:40], line[41:]) for line in out.splitlines() if len(line) >= 40]


def count_landings(root: Path, since: str, until: str) -> int:
    """How many commits the first-parent line of `until` has after `since`."""
    counted = run_git(root, "rev-list", "--first-parent", "--count", f"{since}..{until}").stdout
    return int(counted.strip() or 0)


def apply_work(path: Path, branch: str, onto: str) -> bool:
    """The task's own changes (its branch since it left `onto`) applied on the scratch
    worktree's HEAD and committed; False when they do not apply there. The diff stays bytes
    from `git diff` to `git apply`: a file in any encoding is the task's to have."""
    fork = fork_point(path, branch, onto)
    diff = _git_bytes(path, "diff", *NO_DIFF_PROGRAMS, "--binary", "--full-index", fork, branch, check=True)
    if not diff.stdout.strip():
        return True
    if _git_bytes(path, "apply", "--index", "--whitespace=nowarn", "-", given=diff.stdout).returncode:
        return False
    run_git(path, *_identity(path), "commit", "--quiet", "--no-verify", "-m", f"{branch} alone")
    return True


def _git_bytes(
    root: Path, *args: str, given: bytes | None = None, check: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """git with bytes in and out (a diff of files in any encoding); when `check`, what git
    says on failing is GitFailed, one line."""
    try:
        done = subprocess.run(
            git_argv(*args),
            cwd=root,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            input=given if given is not None else b"",
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitFailed(f"git {args[0]} in {root}: {exc}") from None
    if check and done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip()[-500:]
        raise GitFailed(f"git {' '.join(args[:2])} in {root}: {said}")
    return done


def remove_scratch(root: Path, loop: str) -> None:
    """Every lane's scratch worktree of the loop's train."""
    first = scratch_path(root, loop)
    listed = _listed(root)
    lanes = [p for p in listed if p.parent == first.parent and p.name.startswith(TRAIN)]
    for path in {*lanes, *([first] if first.exists() else [])}:
        run_git(root, "worktree", "remove", "--force", str(path), check=False)
    run_git(root, "worktree", "prune", check=False)

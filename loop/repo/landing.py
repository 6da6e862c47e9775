"""What a landing leaves in git so it can be taken back, and taking it back.

Before a task's branch lands on the loop's branch, `backup` points a ref at the loop's branch
as it was: `refs/loopdeck/backup/<loop>/<task>-<n>` (n counts the task's landings). The
`task-merged` event records the same commit (`before`) with the landed one (`sha`): together
they say which commits the task brought. An agent can write refs, so an undo trusts the
journal's `before` and asks only that a backup ref agree with it (`backup_at`). `revert`
takes them back with one revert commit on the branch checked out: the history only grows, so
nothing anyone fetched is rewritten (never a reset, never a force-push).

`sides` gathers, for a conflict, the other side's intent: the commits that reached the loop's
branch since the task's branch left it and touched the conflicting files, by task when
loopdeck made them.

Argv only, through `loop.repo.gitargv`; refs names come from `safe_name`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from loop.core.errors import LoopdeckError
from loop.repo.worktrees import run_git, safe_name

BACKUPS = "refs/loopdeck/backup"
TASK_COMMIT = re.compile(r"^loopdeck: (?:merge )?task (\S+) \(")
"""The subjects of loopdeck's commits on a task (a worker's turn, a merge): the task's id."""
SIDES_KEPT = 5


class LandingError(LoopdeckError):
    pass


# --- the backup before a landing -------------------------------------------------------------


@dataclass(frozen=True)
class Backup:
    ref: str
    loop: str
    task: str
    n: int
    sha: str
    """The loop's branch before the landing."""


def backups(root: Path, task: str | None = None) -> list[Backup]:
    """The backup refs (of one task), oldest first: by loop (its start), then landing."""
    out = run_git(root, "for-each-ref", "--format=%(objectname) %(refname)", BACKUPS, check=False).stdout
    found = []
    for line in out.splitlines():
        sha, _, ref = line.partition(" ")
        loop, _, leaf = ref[len(BACKUPS) + 1 :].partition("/")
        name, _, n = leaf.rpartition("-")
        if not n.isdigit() or (task is not None and name != safe_name(task)):
            continue
        found.append(Backup(ref, loop, name, int(n), sha))
    return sorted(found, key=lambda b: (b.loop, b.n))


def backup_at(root: Path, task: str, sha: str) -> Backup | None:
    """The task's newest backup ref that points at `sha` (where the journal says the loop's
    branch was before the landing); None when none does. Refs are the agents' to write too:
    one is trusted only where it agrees with the journal."""
    return next((b for b in reversed(backups(root, task)) if b.sha == sha), None)


def backup(root: Path, loop: str, task: str, branch: str) -> str:
    """Point a new ref at `branch` as it is now, before `task` lands on it; its name."""
    n = 1 + max((b.n for b in backups(root, task) if b.loop == safe_name(loop)), default=0)
    ref = f"{BACKUPS}/{safe_name(loop)}/{safe_name(task)}-{n}"
    sha = run_git(root, "rev-parse", "--verify", "--end-of-options", f"refs/heads/{branch}^{{commit}}").stdout
    run_git(root, "update-ref", ref, sha.strip(), "")  # "": only if no such ref exists yet
    return ref


# --- undo ------------------------------------------------------------------------------------


def _commit(root: Path, ref: str) -> str | None:
    done = run_git(
        root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False
    )
    return done.stdout.strip() or None


def contains(root: Path, ancestor: str, ref: str = "HEAD") -> bool:
    return run_git(root, "merge-base", "--is-ancestor", ancestor, ref, check=False).returncode == 0


def landed_commits(root: Path, before: str, after: str) -> tuple[list[str], bool]:
    """What a landing brought: ([the merge commit], True) when `after` is a merge (reverted
    against its first parent), else (its commits, newest first, False)."""
    parents = run_git(root, "rev-list", "--parents", "-n", "1", after).stdout.split()[1:]
    if len(parents) > 1:
        return [after], True
    shas = run_git(root, "rev-list", "--no-merges", f"{before}..{after}").stdout.split()
    return shas, False


def revert(root: Path, before: str, after: str, message: str) -> str:
    """Take back what landed between `before` and `after` with one revert commit on the branch
    checked out at `root`; its sha. Uncommitted changes to other files stay as they are (the
    loop's own status lines in a tracked task graph, say); staged ones, or changes to a file the
    revert takes back, are refused, naming the files. A revert that conflicts with later work is
    undone and refused, naming the files."""
    if run_git(root, "diff", "--cached", "--quiet", check=False).returncode != 0:
        raise LandingError(f"{root} has staged changes: commit or unstage them, then undo")
    # every file a landed commit touched (a file changed and changed back nets to nothing, but
    # `git revert` still refuses to overwrite a person's edit of it)
    landed = set(run_git(root, "diff", "--name-only", "-z", before, after).stdout.split("\0"))
    landed |= set(
        run_git(
            root, "log", "--format=", "--name-only", "--no-renames", "-z", f"{before}..{after}"
        ).stdout.split("\0")
    )
    edited = set(run_git(root, "diff", "--name-only", "-z").stdout.split("\0"))
    both = sorted((landed & edited) - {""})
    if both:
        raise LandingError(
            f"{root} has uncommitted changes in {', '.join(both)}, which the undo takes back: "
            "commit or put them aside, then undo"
        )
    shas, merge = landed_commits(root, before, after)
    if not shas:
        raise LandingError(f"nothing landed between {before[:8]} and {after[:8]}")
    argv = ["revert", "--no-commit", *(["-m", "1"] if merge else []), *shas]
    done = run_git(root, *argv, check=False)
    if done.returncode != 0:
        unmerged = run_git(root, "diff", "--name-only", "--diff-filter=U", "-z", check=False).stdout
        files = [name for name in unmerged.split("\0") if name]
        run_git(root, "revert", "--abort", check=False)
        if not files:  # no conflict: git refused for a reason of its own, said as it said it
            said = (done.stderr or done.stdout).strip().splitlines()
            raise LandingError(
                f"git revert refused: {said[0] if said else 'no reason given'}: nothing was changed"
            )
        raise LandingError(f"the revert conflicts with later work in {', '.join(files)}: nothing was changed")
    named = run_git(root, "config", "user.name", check=False).stdout.strip()
    name = [] if named else ["-c", "user.name=loopdeck"]
    mail = run_git(root, "config", "user.email", check=False).stdout.strip()
    ident = name + ([] if mail else ["-c", "user.email=loopdeck@localhost"])
    run_git(root, *ident, "commit", "--quiet", "--no-verify", "--allow-empty", "-m", message)
    return run_git(root, "rev-parse", "HEAD").stdout.strip()


# --- a conflict's other side -----------------------------------------------------------------


def sides(
    root: Path, branch: str, loop_branch: str, files: tuple[str, ...] | list[str]
) -> list[tuple[str, str]]:
    """Who wrote the other side of a conflict: the commits on `loop_branch` since `branch` left
    it that touched `files`, as (task id, "") for loopdeck's task commits (the driver names the
    task) or ("", subject) for anyone else's; newest first, each once."""
    if not files:
        return []
    out = run_git(
        root,
        "--literal-pathspecs",
        "log",
        "--no-merges",
        "--format=%s",
        f"{branch}..{loop_branch}",
        "--",
        *files,
        check=False,
    ).stdout
    found: list[tuple[str, str]] = []
    for subject in out.splitlines():
        match = TASK_COMMIT.match(subject)
        side = (match.group(1), "") if match else ("", subject.strip())
        if side not in found:
            found.append(side)
        if len(found) >= SIDES_KEPT:
            break
    return found


def head_of(root: Path, branch: str) -> str | None:
    return _commit(root, f"refs/heads/{branch}")

"""`run --workers N --pr`: each task a pull request on the repository's host, through `gh`.

An approved turn's branch is pushed and its pull request opened (or its commits added to the
one already open); the host's checks and reviews are read until they say something
(`loop.core.pulls.judge` decides what, `answer` what to do): a failing check or a change
request goes back to a turn of the same task, told what failed or what was asked; a conflict
with the base goes back to it with the files, hunks and both sides' intent, as the train's
conflicts do (the base merged into its worktree); green and approved, the branch
merged onto the host's base is verified here by the loop's checks first (the loop's branch
never holds a red merge), then landed with `gh pr merge --merge`, and the loop's branch moves
to the host's merge commit.

`gh` runs with argv only, `--` before every value a task or a person gave, the body from a
file. Its token stays here: `SECRETS` never reach a worker's environment, and what gh prints is
redacted before it is journaled.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.core import pulls, scheduler, workflow
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.core.redact import redact
from loop.core.scheduler import Step, Task, Worker
from loop.drivers import resolve
from loop.drivers.merging import Merges
from loop.drivers.session import Session
from loop.repo import landing, worktrees

__all__ = ["GH_TIMEOUT_S", "SECRETS", "Pulls", "decoded"]

SECRETS = ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
"""The host's tokens: gh reads them here; no child of a `--pr` loop sees them (`Children.hidden`)."""
GH_TIMEOUT_S = 60.0
POLL_S = 2.0
"""How often an open pull request's checks and reviews are read again."""
VIEW_FIELDS = "url,state,headRefOid,mergeable,reviewDecision,reviews,comments"
PULL_URL = re.compile(r"/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/pull/(\d+)/?$")
"""A pull request's address: its repository's owner and name, and its number."""

Apply = Callable[[Callable[[LoopState], Step | None]], Step | None]


@dataclass
class Open:
    """A task's pull request this run waits on."""

    url: str
    task: str
    branch: str


class Pulls:
    """The tasks' pull requests: opened, read, answered, landed."""

    def __init__(self, session: Session, merges: Merges, apply: Apply, remote: str = "origin") -> None:
        self.session = session
        self.merges = merges
        self.apply = apply
        self.remote = remote
        self.open: dict[str, Open] = {}
        """Worker → the pull request it waits on (its turn approved, its branch pushed)."""
        self.last_poll = 0.0
        self.poll_s = float(os.environ.get("LOOPDECK_PR_POLL_S") or POLL_S)

    @property
    def root(self) -> Path:
        return self.session.ws.root

    # --- running gh and git ----------------------------------------------------------------------

    def gh(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        program = shutil.which("gh")
        if program is None:
            raise LoopdeckError("--pr needs the GitHub CLI `gh` on PATH (https://cli.github.com)")
        env = {**os.environ, "GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1"}
        try:
            done = subprocess.run(
                [program, *args],
                cwd=self.root,
                env=env,
                capture_output=True,
                text=True,
                timeout=GH_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LoopdeckError(f"gh {' '.join(args[:2])}: {exc}") from None
        if done.returncode not in ok:
            said = redact(
                (done.stderr or done.stdout).strip().splitlines()[0]
                if (done.stderr or done.stdout).strip()
                else ""
            )
            raise LoopdeckError(f"gh {' '.join(args[:2])} failed (exit {done.returncode}): {said}")
        return done

    def gh_json(self, *args: str, ok: tuple[int, ...] = (0,), default: str = "{}") -> Any:
        """`gh` with `--json`: its output decoded, or a LoopdeckError naming the command."""
        return decoded(self.gh(*args, ok=ok).stdout, args, default)

    def git(self, *args: str) -> str:
        return worktrees.run_git(self.root, *args, timeout=GH_TIMEOUT_S).stdout.strip()

    # --- before the loop ---------------------------------------------------------------------

    def prepare(self) -> None:
        """The loop's branch on the host (the pull requests' base); refused without gh, a
        worktree per task, or the remote."""
        if self.merges.isolation != scheduler.WORKTREE or self.merges.loop_branch is None:
            raise LoopdeckError("--pr needs a git repository and worktrees (not --isolation locks)")
        if shutil.which("gh") is None:
            raise LoopdeckError("--pr needs the GitHub CLI `gh` on PATH (https://cli.github.com)")
        remotes = self.git("remote").split()
        if self.remote not in remotes:
            raise LoopdeckError(
                f"--pr pushes each task's branch to the remote {self.remote!r}; {self.root} has none"
            )
        branch = self.merges.loop_branch
        with contextlib.suppress(LoopdeckError):  # the host's base first, where it has one
            self.follow(branch)
        self.git("push", "--quiet", self.remote, "--", f"refs/heads/{branch}:refs/heads/{branch}")

    # --- a turn approved: its branch pushed, its pull request opened -----------------------------

    def submit(self, worker: Worker, task: Task, report: str) -> None:
        """Push the task's branch and open its pull request (or find the one open); the worker
        then waits for the host's word."""
        branch, base = worker.branch, self.merges.loop_branch
        if branch is None or base is None:
            raise LoopdeckError(f"task {task.id} has no branch to open a pull request from")
        self.git("push", "--quiet", self.remote, "--", f"refs/heads/{branch}:refs/heads/{branch}")
        asked = ("pr", "list", "--head", branch, "--base", base, "--state", "open", "--json", "url")
        listed = self.gh_json(*asked, default="[]")
        kind = "pr-updated"
        if not isinstance(listed, list) or not all(isinstance(p, dict) and p.get("url") for p in listed):
            raise LoopdeckError(
                f"gh pr list: expected a list of pull requests with urls, got {_shown(listed)}"
            )
        if listed:
            url = str(listed[0]["url"])
        else:
            with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as out:
                out.write(redact(pulls.body(task.description, report, task.target_files)))
            try:
                made = self.gh(
                    "pr", "create", "--head", branch, "--base", base,
                    "--title", pulls.title(task.id, task.subject), "--body-file", out.name,
                )  # fmt: skip
            finally:
                os.unlink(out.name)
            said = made.stdout.strip().splitlines()
            if not said or "://" not in said[-1]:
                raise LoopdeckError(
                    f"gh pr create: expected the new pull request's url, got {_shown(made.stdout)}"
                )
            url = said[-1].strip()
            kind = "pr-opened"
        self.open[worker.name] = Open(url, task.id, branch)
        self.journal(kind, {"worker": worker.name, "task": task.id, "branch": branch, "url": url})

    def journal(self, kind: str, data: dict[str, Any]) -> None:
        def note(state: LoopState) -> Step:
            step = scheduler.step_of(state)
            step.events.append((kind, data))
            return step

        self.apply(note)

    # --- the host's word -------------------------------------------------------------------------

    def read(self, url: str) -> pulls.Pull:
        """The pull request as the host has it: state, head, reviews, comments, checks."""
        view = self.gh_json("pr", "view", url, "--json", VIEW_FIELDS)
        asked = ("pr", "checks", url, "--json", "name,bucket,link,description")
        done = self.gh(*asked, ok=(0, 1, 8))
        listed: Any = []
        if done.returncode == 0:
            listed = decoded(done.stdout, asked, "[]")
        elif "no checks reported" not in done.stderr:
            raise LoopdeckError(f"gh pr checks {url}: {redact(done.stderr.strip())[:300]}")
        if not isinstance(view, dict) or not _records(listed):
            raise LoopdeckError(f"gh pr view/checks {url}: not the JSON expected")
        if not _records(view.get("reviews") or []) or not _records(view.get("comments") or []):
            raise LoopdeckError(f"gh pr view {url}: its reviews or comments are not the JSON expected")
        return pulls.Pull(
            url=url,
            state=str(view.get("state") or "OPEN"),
            head=str(view.get("headRefOid") or ""),
            mergeable=str(view.get("mergeable") or "UNKNOWN"),
            decision=str(view.get("reviewDecision") or ""),
            checks=tuple(
                pulls.Check(
                    str(c.get("name", "")),
                    str(c.get("bucket", "")),
                    str(c.get("link", "")),
                    str(c.get("description", "")),
                )
                for c in listed
            ),
            reviews=tuple(
                pulls.Review(
                    str(_field(r, "author", "login")),
                    str(r.get("state", "")),
                    str(r.get("body", "")),
                    str(_field(r, "commit", "oid")),
                    str(r.get("authorAssociation") or ""),
                )
                for r in view.get("reviews") or []
            ),
            comments=tuple(
                pulls.Comment(
                    str(_field(c, "author", "login")),
                    str(c.get("body", "")),
                    str(c.get("authorAssociation") or ""),
                )
                for c in view.get("comments") or []
            )
            + (self.inline(url) if view.get("reviewDecision") == "CHANGES_REQUESTED" else ()),
        )

    def inline(self, url: str) -> tuple[pulls.Comment, ...]:
        """The review comments on lines of a pull request's diff, which `gh pr view` leaves out
        (`gh api …/pulls/N/comments`); read when a change is requested, the only time a worker
        reads them."""
        found = PULL_URL.search(url)
        if found is None:
            raise LoopdeckError(f"{_shown(url)} is not a pull request's address (…/OWNER/REPO/pull/N)")
        owner, repo, number = found.groups()
        path = f"repos/{owner}/{repo}/pulls/{number}/comments?per_page=100"
        listed = self.gh_json("api", "--paginate", "--", path, default="[]")
        if not _records(listed):
            raise LoopdeckError(f"gh api {path}: not the JSON expected")
        return tuple(
            pulls.Comment(
                str(_field(c, "user", "login")),
                str(c.get("body", "")),
                str(c.get("author_association") or ""),
                path=str(c.get("path") or ""),
                line=next((n for n in (c.get("line"), c.get("original_line")) if _count(n)), None),
            )
            for c in listed
        )

    def poll(self, force: bool = False) -> bool:
        """Read every open pull request (every `poll_s`) and act on what the host says; True
        when anything moved."""
        if not self.open or (not force and time.monotonic() - self.last_poll < self.poll_s):
            return False
        self.last_poll = time.monotonic()
        moved = False
        for name, pr in list(self.open.items()):
            try:
                verdict = pulls.judge(self.read(pr.url))
            except (LoopdeckError, ValueError) as exc:
                self.session.warn(f"task {pr.task}: its pull request could not be read: {exc}")
                continue
            todo = pulls.answer(verdict, name, pr.task, pr.url)
            if todo is None:
                continue
            moved = True
            del self.open[name]
            self.act(name, pr, todo)
        return moved

    def act(self, name: str, pr: Open, todo: pulls.Answer) -> None:
        """Carry out what `loop.core.pulls.answer` decided."""
        now = self.session.now
        if todo.event is not None:
            self.journal(*todo.event)
        problem = todo.problem
        if problem is not None:
            self.apply(lambda s: workflow.merge_ended(s, name, sha=None, problem=problem, now=now()))
            return
        self.apply(lambda s: workflow.audited(s, name, todo.approved, todo.feedback, now()))
        if todo.approved:  # into the queue, landed here
            self.land(name, pr, merged_already=todo.merged_already, conflict=todo.conflict)

    # --- landing ---------------------------------------------------------------------------------

    def land(self, name: str, pr: Open, merged_already: bool = False, conflict: bool = False) -> None:
        """The host's base merged with the task's branch, verified by the loop's checks here,
        then merged on the host (only at the head verified) and the loop's branch moved to the
        host's merge commit, once its tree is the one verified. With `conflict` (the host says
        the branch conflicts) only the merge is tried: its conflict goes back to the worker."""
        now = self.session.now
        base = self.merges.loop_branch
        assert base is not None
        before = self.session.store.read()
        worker = scheduler.board_of(before).worker(name) if before is not None else None
        tree = worker.worktree if worker is not None else None
        checked = None
        verified = ""
        try:
            if merged_already:  # merged on the host by a person: `undo` can take it back too
                landing.backup(self.root, self.merges.loop_name, pr.task, base)
            self.follow(base)
            if not merged_already:
                head = self.git(
                    "rev-parse", "--verify", "--end-of-options", f"refs/heads/{pr.branch}^{{commit}}"
                )
                outcome = worktrees.merge(self.root, pr.branch, f"loopdeck: verify task {pr.task} ({pr.url})")
                if not outcome.merged:  # back to the worker, told both sides' intent as the train's
                    conflicts, hunks = outcome.conflicts, outcome.hunks
                    intent = (
                        resolve.intent(self.root, self.session, worker, base, conflicts)
                        if worker is not None
                        else ("", [])
                    )
                    self.apply(
                        lambda s: workflow.merge_ended(
                            s, name, sha=None, conflicts=conflicts, hunks=hunks, intent=intent, now=now()
                        )
                    )
                    return
                if conflict:
                    worktrees.abandon(self.root)
                    raise LoopdeckError("the host says it conflicts with its base, which merges cleanly here")
                try:
                    verified = self.git("write-tree")  # the merged tree the checks run on
                    failure = self.merges.verify_tree()
                finally:
                    worktrees.abandon(self.root)
                checked = self.merges.verification.validation
                if failure is not None:
                    self.apply(
                        lambda s: workflow.merge_ended(
                            s, name, sha=None, failure=failure, validation=checked, now=now()
                        )
                    )
                    return
                landing.backup(self.root, self.merges.loop_name, pr.task, base)
                self.gh("pr", "merge", pr.url, "--merge", "--match-head-commit", head)
            sha = self.merged(pr, base, verified)
        except LoopdeckError as exc:
            why = f"task {pr.task}: landing {pr.url} failed: {exc}"
            self.apply(lambda s: workflow.merge_ended(s, name, sha=None, problem=why, now=now()))
            return
        self.session.tally.commits.append(sha)
        self.journal("pr-merged", {"worker": name, "task": pr.task, "url": pr.url, "sha": sha})
        self.apply(lambda s: workflow.merge_ended(s, name, sha=sha, validation=checked, now=now()))
        if tree:  # the task is done: its worktree goes, as the train's does
            worktrees.remove(self.root, Path(tree), pr.branch)

    def merged(self, pr: Open, base: str, verified: str) -> str:
        """The host's merge commit of `pr`, the loop's branch moved to the host's base holding it;
        refused (the branch left where it is) when the host's base does not hold it or its tree
        is not the `verified` one (the base moved on the host between the check and the merge)."""
        view = self.gh_json("pr", "view", pr.url, "--json", "state,mergeCommit")
        if not isinstance(view, dict) or view.get("state") != "MERGED":
            state = view.get("state") if isinstance(view, dict) else None
            raise LoopdeckError(f"the host did not merge {pr.url} (it is {state})")
        merge = str(_field(view, "mergeCommit", "oid"))
        if not merge:
            raise LoopdeckError(f"gh pr view {pr.url}: merged, but it names no merge commit")
        tip = self.fetch(base)
        if not landing.contains(self.root, merge, tip):
            raise LoopdeckError(
                f"the host's {base} does not hold the merge commit {merge[:12]}; check it by hand"
            )
        if (
            verified
            and self.git("rev-parse", "--verify", "--end-of-options", f"{merge}^{{tree}}") != verified
        ):
            raise LoopdeckError(
                f"the host merged it as {merge[:12]}, which is not the tree the loop's checks passed "
                f"(its base moved on the host); {base} was left as it was: check the merge, then resume"
            )
        self.git("merge", "--ff-only", "--quiet", tip)
        return merge

    def fetch(self, base: str) -> str:
        """The host's `base`, fetched: its tip."""
        self.git("fetch", "--quiet", self.remote, "--", f"refs/heads/{base}")
        return self.git("rev-parse", "--verify", "FETCH_HEAD^{commit}")

    def follow(self, base: str) -> str:
        """The loop's branch moved to the host's base (a fast-forward: the host only ever
        adds merges of what the loop verified)."""
        self.git("merge", "--ff-only", "--quiet", self.fetch(base))
        return self.git("rev-parse", "HEAD")


def decoded(text: str, args: tuple[str, ...], default: str) -> Any:
    """gh's JSON output, or a LoopdeckError naming the command (one line)."""
    try:
        return json.loads(text or default)
    except ValueError:
        raise LoopdeckError(f"gh {' '.join(args[:2])}: expected JSON, got {_shown(text)}") from None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _records(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


def _field(record: dict[str, Any], name: str, key: str) -> Any:
    """`record[name][key]`, or "" when either is missing (or not an object)."""
    inner = record.get(name)
    return (inner.get(key) or "") if isinstance(inner, dict) else ""


def _shown(value: Any) -> str:
    """A short one-line excerpt of what gh printed, redacted."""
    text = value if isinstance(value, str) else json.dumps(value)[:200]
    return repr(redact(" ".join(text.split()))[:120])

"""`run --workers N --pr`: each task a pull request on the repository's host, through `gh`.

An approved turn's branch is pushed and its pull request opened (or its commits added to the
one already open); the host's checks and reviews are read until they say something
(`loop.core.pulls.judge` decides what): a failing check or a change request goes back to a
turn of the same task, told what failed or what was asked; green and approved, the branch
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
from loop.drivers.merging import Merges
from loop.drivers.session import Session
from loop.repo import worktrees
from loop.repo.gitargv import git_argv

__all__ = ["GH_TIMEOUT_S", "SECRETS", "Pulls", "without_secrets"]

SECRETS = ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
"""The host's tokens: gh reads them here; a worker never sees them."""
GH_TIMEOUT_S = 60.0
POLL_S = 2.0
"""How often an open pull request's checks and reviews are read again."""
VIEW_FIELDS = "url,state,headRefOid,mergeable,reviewDecision,reviews,comments"

Apply = Callable[[Callable[[LoopState], Step | None]], Step | None]


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """A worker's environment with the host's tokens taken out."""
    return {k: v for k, v in env.items() if k not in SECRETS}


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

    def git(self, *args: str) -> str:
        try:
            done = subprocess.run(
                git_argv(*args),
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=GH_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LoopdeckError(f"git {args[0]}: {exc}") from None
        if done.returncode != 0:
            raise LoopdeckError(f"git {args[0]} in {self.root}: {redact(done.stderr.strip())[-300:]}")
        return done.stdout.strip()

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
        found = self.gh("pr", "list", "--head", branch, "--base", base, "--state", "open", "--json", "url")
        listed = json.loads(found.stdout or "[]")
        kind = "pr-updated"
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
            url = made.stdout.strip().splitlines()[-1]
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
        view = json.loads(self.gh("pr", "view", url, "--json", VIEW_FIELDS).stdout or "{}")
        done = self.gh("pr", "checks", url, "--json", "name,bucket,link,description", ok=(0, 1, 8))
        listed: list[dict[str, Any]] = []
        if done.returncode == 0:
            listed = json.loads(done.stdout or "[]")
        elif "no checks reported" not in done.stderr:
            raise LoopdeckError(f"gh pr checks {url}: {redact(done.stderr.strip())[:300]}")
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
                    str((r.get("author") or {}).get("login", "")),
                    str(r.get("state", "")),
                    str(r.get("body", "")),
                    str((r.get("commit") or {}).get("oid", "")),
                )
                for r in view.get("reviews") or []
            ),
            comments=tuple(
                (str((c.get("author") or {}).get("login", "")), str(c.get("body", "")))
                for c in view.get("comments") or []
            ),
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
            if verdict.kind == pulls.WAIT:
                continue
            moved = True
            del self.open[name]
            self.act(name, pr, verdict)
        return moved

    def act(self, name: str, pr: Open, verdict: pulls.Verdict) -> None:
        now = self.session.now
        if verdict.kind == pulls.REWORK:
            self.journal("pr-rework", {"worker": name, "task": pr.task, "url": pr.url, **verdict.facts})
            self.apply(lambda s: workflow.audited(s, name, False, verdict.feedback, now()))
            return
        if verdict.kind == pulls.PERSON:
            reason = f"task {pr.task}: {verdict.feedback}"
            self.apply(lambda s: workflow.merge_ended(s, name, sha=None, problem=reason, now=now()))
            return
        self.apply(lambda s: workflow.audited(s, name, True, "", now()))  # into the queue, landed here
        self.land(
            name, pr, merged_already=verdict.kind == pulls.MERGED, conflict=verdict.kind == pulls.CONFLICT
        )

    # --- landing ---------------------------------------------------------------------------------

    def land(self, name: str, pr: Open, merged_already: bool = False, conflict: bool = False) -> None:
        """The host's base merged with the task's branch, verified by the loop's checks here,
        then merged on the host and the loop's branch moved to the host's merge commit. With
        `conflict` (the host says the branch conflicts) only the merge is tried: its conflict goes
        back to the worker."""
        now = self.session.now
        base = self.merges.loop_branch
        assert base is not None
        before = self.session.store.read()
        worker = scheduler.board_of(before).worker(name) if before is not None else None
        tree = worker.worktree if worker is not None else None
        try:
            self.follow(base)
            if not merged_already:
                outcome = worktrees.merge(self.root, pr.branch, f"loopdeck: verify task {pr.task} ({pr.url})")
                if not outcome.merged:
                    conflicts, hunks = outcome.conflicts, outcome.hunks
                    self.apply(
                        lambda s: workflow.merge_ended(
                            s, name, sha=None, conflicts=conflicts, hunks=hunks, now=now()
                        )
                    )
                    return
                if conflict:
                    worktrees.abandon(self.root)
                    raise LoopdeckError("the host says it conflicts with its base, which merges cleanly here")
                failure = self.merges.verify_tree()
                checked = self.merges.verification.validation
                worktrees.abandon(self.root)
                if failure is not None:
                    self.apply(
                        lambda s: workflow.merge_ended(
                            s, name, sha=None, failure=failure, validation=checked, now=now()
                        )
                    )
                    return
                self.gh("pr", "merge", pr.url, "--merge")
            else:
                checked = None
            state = json.loads(self.gh("pr", "view", pr.url, "--json", "state").stdout or "{}")
            if state.get("state") != "MERGED":
                raise LoopdeckError(f"the host did not merge {pr.url} (it is {state.get('state')})")
            sha = self.follow(base)
        except LoopdeckError as exc:
            why = f"task {pr.task}: landing {pr.url} failed: {exc}"
            self.apply(lambda s: workflow.merge_ended(s, name, sha=None, problem=why, now=now()))
            return
        self.session.tally.commits.append(sha)
        self.journal("pr-merged", {"worker": name, "task": pr.task, "url": pr.url, "sha": sha})
        self.apply(lambda s: workflow.merge_ended(s, name, sha=sha, validation=checked, now=now()))
        if tree:  # the task is done: its worktree goes, as the train's does
            worktrees.remove(self.root, Path(tree), pr.branch)

    def follow(self, base: str) -> str:
        """The loop's branch moved to the host's base (a fast-forward: the host only ever
        adds merges of what the loop verified)."""
        self.git("fetch", "--quiet", self.remote, "--", f"refs/heads/{base}")
        self.git("merge", "--ff-only", "--quiet", "FETCH_HEAD")
        return self.git("rev-parse", "HEAD")

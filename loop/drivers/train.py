"""The merge train: approved branches landed together, verified once, bisected on red.

Waiting for each branch's verification before the next starts makes a slow test suite the
loop's pace. The train merges a batch of ready branches in a scratch worktree (never on the
loop's branch) and runs the loop's checks once: green, the loop's branch is fast-forwarded to
the batch; red, the batch is split and each half verified on its own, down to the branches
that break it, and the rest land. The loop's branch only ever moves to a verified tree.

A branch that fails by itself on the loop's branch is asked whether its own changes pass
without the landings since it left the loop's branch (and `BLAME_WINDOW` before): if they
do, it fails only beside one of them, which is found by halving those landings, and named.
What each outcome means for the task is `loop.core.workflow.merge_ended`'s to say; this module
only carries the train out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.core.scheduler import Worker
from loop.repo import worktrees

BLAME_WINDOW = 16
"""How many landings before a branch left the loop's branch it is checked beside too (the
landings since it left are checked always)."""
LANDED_TASK = re.compile(r"^loopdeck: merge task (\S+) \(")
"""The subject of the merge commit of a task the train landed (`message`)."""


def message(worker: Worker) -> str:
    return f"loopdeck: merge task {worker.task} ({worker.branch})"


@dataclass
class Outcome:
    """What the train made of one branch: landed (`sha`), a conflict, or a failure (`beside`:
    the task it fails beside, passing alone)."""

    worker: Worker
    sha: str | None = None
    conflict: worktrees.Merge | None = None
    failure: str | None = None
    beside: str | None = None
    validation: Mapping[str, Any] | None = None


Verify = Callable[[Path], tuple[str | None, Mapping[str, Any] | None]]
"""The loop's checks run in a folder: their failure (None when green) and their results."""


@dataclass
class Train:
    """One run of the train over a batch, on the loop's branch at `root`."""

    root: Path
    loop: str
    verify: Verify
    land: Callable[[list[Outcome]], None]
    """Told each time the loop's branch moved to a verified batch: what landed, in order."""
    verifications: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    ready: Callable[[Path], None] | None = None
    """Makes the scratch worktree ready for the checks, once (the project's copied files and
    setup, as a worker's worktree gets them): the checks ran in the workspace before."""
    scratch: Path | None = None
    conflicted: list[tuple[Worker, worktrees.Merge, str]] = field(default_factory=list)
    """Branches that conflicted in a stack, with the commit they were merged onto: retried
    alone on what landed before their conflict is said (it may be with a branch that failed)."""
    start: str = ""
    """The loop's branch when this run began: a branch that passes there and fails after this
    run's landings fails beside one of them (the first place its blame looks)."""

    def run(self, batch: Sequence[Worker]) -> list[Outcome]:
        """Land what can land of `batch` (in queue order); the outcomes of the rest."""
        base = self.start = worktrees.head(self.root)
        self.scratch = worktrees.scratch(self.root, self.loop, base)
        if self.ready is not None:
            self.ready(self.scratch)
        tip = self._land(base, list(batch))
        retry, self.conflicted = self.conflicted, []
        for worker, clash, onto in retry:
            if onto == tip:  # merged onto this very tree: the conflict is with the loop's branch
                self.outcomes.append(Outcome(worker, conflict=clash))
            else:  # it met a batch-mate that may not have landed: alone on what did
                tip = self._land(tip, [worker])
        self.outcomes += [Outcome(worker, conflict=clash) for worker, clash, _onto in self.conflicted]
        return self.outcomes

    def _stack(self, base: str, group: Sequence[Worker]) -> tuple[str, list[Outcome]]:
        """The group merged one by one onto `base` in the scratch worktree: its tip and the
        branches merged (a branch that conflicts is left out, kept in `conflicted`)."""
        assert self.scratch is not None
        worktrees.reset_to(self.scratch, base)
        tip, merged = base, []
        for worker in group:
            assert worker.branch is not None
            done = worktrees.merge_commit(self.scratch, worker.branch, message(worker))
            if not done.merged:
                self.conflicted.append((worker, done, tip))
                continue
            assert done.sha is not None
            tip = done.sha
            merged.append(Outcome(worker, sha=tip))
        return tip, merged

    def _check(self, where: Path) -> tuple[str | None, Mapping[str, Any] | None]:
        self.verifications += 1
        return self.verify(where)

    def _land(
        self, base: str, group: Sequence[Worker], red: tuple[str, Mapping[str, Any] | None] | None = None
    ) -> str:
        """Land what can land of `group` on `base`; the loop's branch's new tip. `red`: the
        checks' failure when `group` on `base` is already known to fail (the rest of a batch
        whose first half landed as it was), which is not verified again."""
        if red is None:
            tip, merged = self._stack(base, group)
            if not merged:
                return base
            assert self.scratch is not None
            failure, validation = self._check(self.scratch)
            if failure is None:
                worktrees.fast_forward(self.root, tip)
                for outcome in merged:
                    outcome.validation = validation
                self.outcomes += merged
                self.land(merged)
                return tip
            red = (failure, validation)
            group = [o.worker for o in merged]
        if len(group) == 1:
            self._blame(base, group[0], *red)
            return base
        half = len(group) // 2
        landed = len(self.outcomes)
        tip = self._land(base, group[:half])
        whole = sum(o.sha is not None for o in self.outcomes[landed:]) == half  # the first half as it was
        return self._land(tip, group[half:], red if whole else None)

    def _blame(self, base: str, worker: Worker, failure: str, validation: Mapping[str, Any] | None) -> None:
        """A branch that fails on `base` by itself: do its own changes pass without the last
        landings of the loop's branch (this run's first, then those since it left the loop's
        branch and `BLAME_WINDOW` before)? If so, the landing they fail beside is named."""
        assert worker.branch is not None
        beside = None
        fork = worktrees.fork_point(self.root, worker.branch, base)
        count = worktrees.count_landings(self.root, fork, base) + BLAME_WINDOW
        since = worktrees.landings(self.root, base, count)
        shas = [sha for sha, _subject in since]
        start = shas.index(self.start) if self.start in shas[:-1] else None
        if start is not None and not self._fails(worker, base, self.start):
            beside = self._first_beside(worker, base, since[start:])  # beside what this run landed
        elif len(since) > 1:
            before = since if start is None else since[: start + 1]  # fails on the run's start
            if len(before) > 1 and not self._fails(worker, base, before[0][0]):
                beside = self._first_beside(worker, base, before)
        self.outcomes.append(Outcome(worker, failure=failure, beside=beside, validation=validation))

    def _fails(self, worker: Worker, base: str, at: str) -> bool:
        """Do the task's own changes (since it left `base`) fail the checks applied on `at`?"""
        assert self.scratch is not None and worker.branch is not None
        worktrees.reset_to(self.scratch, at)
        if not worktrees.apply_work(self.scratch, worker.branch, base):
            return True
        return self._check(self.scratch)[0] is not None

    def _first_beside(self, worker: Worker, base: str, since: Sequence[tuple[str, str]]) -> str | None:
        """The task of the landing in `since` from which the task's changes fail (halving: they
        pass on the first commit and fail on the last)."""
        low, high = 1, len(since) - 1  # passes on since[low - 1]; fails on since[high]
        while low < high:
            mid = (low + high) // 2
            if self._fails(worker, base, since[mid][0]):
                high = mid
            else:
                low = mid + 1
        found = LANDED_TASK.match(since[low][1])
        return found.group(1) if found else None

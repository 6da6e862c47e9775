"""The merge train: approved branches landed together, verified once, split on red.

Waiting for each branch's verification before the next starts makes a slow test suite the
loop's pace. The train merges a batch of ready branches in a scratch worktree (never on the
loop's branch) and runs the loop's checks once: green, the loop's branch is fast-forwarded to
the batch. Red, the batch is split into parts and the batch without each part is checked, up
to `Lanes.count` checks at once: the largest that passes lands, and the part it left out is
split again on the new tip, down to the branches that break it. The loop's branch only ever
moves to a verified tree.

A branch that fails by itself on the loop's branch is handed to `blame`, which runs beside the
next batches rather than before them: do its own changes pass on the loop's branch as it was
when it left (and `BLAME_WINDOW` landings before)? If they do, it fails only beside one of the
landings since, which is found by searching them and named. What each outcome means for the
task is `loop.core.workflow.merge_ended`'s to say; this module only carries the train out.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from typing import Any, TypeVar

from loop.core.scheduler import Worker
from loop.repo import worktrees

BLAME_WINDOW = 16
"""How many landings before a branch left the loop's branch it is checked beside too (the
landings since it left are checked always)."""
LANDED_TASK = re.compile(r"^loopdeck: merge task (\S+) \(")
"""The subject of the merge commit of a task the train landed (`message`)."""

T = TypeVar("T")


def message(worker: Worker) -> str:
    return f"loopdeck: merge task {worker.task} ({worker.branch})"


class Halted(Exception):
    """Nothing more lands in this run of the train: a signal ended a check early (what it
    checked is not known to pass), or the loop stopped or let go of a branch meanwhile."""


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
"""The loop's checks run in a folder: their failure (None when green) and their results; raises
`Halted` when a signal ended them."""


class Lanes:
    """The train's scratch worktrees: one per check it may run at once (`count`), each made
    ready for the checks once (`ready`: the project's copied files and setup)."""

    def __init__(self, root: Path, loop: str, count: int, ready: Callable[[Path], None] | None) -> None:
        self.root = root
        self.loop = loop
        self.count = max(1, count)
        self.ready = ready
        self._free: SimpleQueue[Path | None] = SimpleQueue()
        self._unmade = list(range(self.count, 0, -1))
        """The lanes not made yet (their numbers): the lowest is made first."""
        self._lock = threading.Lock()
        self._making = threading.Lock()
        self.checks = 0
        """The checks run in the lanes so far (a batch, its parts, a blame's probes)."""

    @contextmanager
    def lane(self) -> Iterator[Path]:
        """A scratch worktree of its own for one job: a free one, else a new one while fewer
        than `count` exist, else the next one freed."""
        while True:
            with self._lock:
                number = self._unmade.pop() if self._free.empty() and self._unmade else None
            if number is None:
                path = self._free.get()
                if path is None:  # a lane could not be made: try making it here
                    continue
                break
            try:
                with self._making:  # git worktree add, one at a time
                    path = worktrees.scratch(self.root, self.loop, "HEAD", number)
                if self.ready is not None:
                    self.ready(path)
            except BaseException:
                with self._lock:
                    self._unmade.append(number)
                self._free.put(None)  # whoever waits for a lane tries again
                raise
            break
        try:
            yield path
        finally:
            self._free.put(path)

    def run(self, job: Callable[[Path], T]) -> T:
        with self.lane() as path:
            return job(path)

    def map(self, jobs: Sequence[Callable[[Path], T]]) -> list[T]:
        """Each job in a lane of its own, up to `count` at once; their results in order."""
        if len(jobs) <= 1 or self.count == 1:
            return [self.run(job) for job in jobs]
        with ThreadPoolExecutor(max_workers=min(self.count, len(jobs))) as pool:
            return list(pool.map(self.run, jobs))

    def check(self, verify: Verify, where: Path) -> tuple[str | None, Mapping[str, Any] | None]:
        with self._lock:
            self.checks += 1
        return verify(where)


@dataclass
class Tried:
    """A group of branches merged onto a commit in a lane and, when any merged, checked."""

    tip: str
    merged: list[Outcome]
    conflicted: list[tuple[Worker, worktrees.Merge, str]]
    failure: str | None = None
    validation: Mapping[str, Any] | None = None

    @property
    def green(self) -> bool:
        return bool(self.merged) and not self.conflicted and self.failure is None


@dataclass
class Train:
    """One run of the train over a batch, on the loop's branch at `root`."""

    root: Path
    verify: Verify
    land: Callable[[Tried], bool]
    """Asked to land a green tree: the loop's branch fast-forwarded to its tip and its branches
    landed; False when they may not land any more (the train halts)."""
    lanes: Lanes
    outcomes: list[Outcome] = field(default_factory=list)
    """Landed branches and conflicts, in order."""
    failed: list[tuple[Outcome, str]] = field(default_factory=list)
    """Branches that fail by themselves on the loop's branch, with the commit they fail on:
    what they fail beside is `blame`'s to find."""
    conflicted: list[tuple[Worker, worktrees.Merge, str]] = field(default_factory=list)
    """Branches that conflicted in a stack, with the commit they were merged onto: retried
    alone on what landed before their conflict is said (it may be with a branch that failed)."""

    def run(self, batch: Sequence[Worker]) -> list[Outcome]:
        """Land what can land of `batch`; the outcomes of the rest (those
        that fail on their own are in `failed`)."""
        tip = self._land(worktrees.head(self.root), list(batch))
        retry, self.conflicted = self.conflicted, []
        for worker, clash, onto in retry:
            if onto == tip:  # merged onto this very tree: the conflict is with the loop's branch
                self.outcomes.append(Outcome(worker, conflict=clash))
            else:  # it met a batch-mate that may not have landed: alone on what did
                tip = self._land(tip, [worker])
        self.outcomes += [Outcome(worker, conflict=clash) for worker, clash, _onto in self.conflicted]
        return self.outcomes

    def _tried(self, base: str, group: Sequence[Worker]) -> Callable[[Path], Tried]:
        """The job: `group` merged one by one onto `base` in a lane (a branch that conflicts is
        left out), then checked."""

        def job(lane: Path) -> Tried:
            worktrees.reset_to(lane, base)
            tried = Tried(base, [], [])
            for worker in group:
                assert worker.branch is not None
                done = worktrees.merge_commit(lane, worker.branch, message(worker))
                if not done.merged:
                    tried.conflicted.append((worker, done, tried.tip))
                    continue
                assert done.sha is not None
                tried.tip = done.sha
                tried.merged.append(Outcome(worker, sha=done.sha))
            if tried.merged:
                tried.failure, tried.validation = self.lanes.check(self.verify, lane)
            return tried

        return job

    def _landed(self, tried: Tried) -> str:
        """A green tree landed (`land`): the loop's branch's new tip."""
        for outcome in tried.merged:
            outcome.validation = tried.validation
        if not self.land(tried):
            raise Halted
        self.outcomes += tried.merged
        return tried.tip

    def _land(
        self, base: str, group: Sequence[Worker], red: tuple[str, Mapping[str, Any] | None] | None = None
    ) -> str:
        """Land what can land of `group` on `base`; the loop's branch's new tip. `red`: the
        checks' failure when `group` on `base` is already known to fail (what a batch left
        out of what landed of it), which is not verified again."""
        if red is None:
            tried = self.lanes.run(self._tried(base, group))
            self.conflicted += tried.conflicted
            if not tried.merged:
                return base
            if tried.failure is None:
                return self._landed(tried)
            red = (tried.failure, tried.validation)
            group = [o.worker for o in tried.merged]
        if len(group) == 1:
            self.failed.append((Outcome(group[0], failure=red[0], validation=red[1]), base))
            return base
        parts = split(group, min(max(2, self.lanes.count), len(group)))
        # the group without each part, the last part left out first (earlier branches land
        # first), as many at once as there are lanes; the first round with a green one decides
        without = [[w for w in group if w not in part] for part in reversed(parts)]
        known: dict[tuple[str, ...], tuple[str, Mapping[str, Any] | None]] = {}
        for start in range(0, len(without), self.lanes.count):
            tries = self.lanes.map(
                [self._tried(base, rest) for rest in without[start : start + self.lanes.count]]
            )
            for rest, tried in zip(without[start:], tries, strict=False):
                if tried.green:
                    left_out = [w for w in group if w not in rest]
                    return self._land(self._landed(tried), left_out, red)  # still red beside them
                if tried.merged and not tried.conflicted and tried.failure is not None:
                    known[names(rest)] = (tried.failure, tried.validation)
        return self._each_alone(base, parts, known)

    def _each_alone(
        self,
        base: str,
        parts: list[list[Worker]],
        known: dict[tuple[str, ...], tuple[str, Mapping[str, Any] | None]],
    ) -> str:
        """More than one part breaks the group: each part checked alone on `base` (at once;
        with two parts their checks were the ones above), those that pass landed together, a
        branch that fails alone handed to its blame, a larger part that fails split again."""
        alone = [known.get(names(part)) for part in parts]
        unknown = [i for i, red in enumerate(alone) if red is None]
        green: list[tuple[int, Tried]] = []
        for i, tried in zip(
            unknown, self.lanes.map([self._tried(base, parts[i]) for i in unknown]), strict=True
        ):
            if tried.green:
                green.append((i, tried))
            elif tried.merged and not tried.conflicted:
                alone[i] = (tried.failure or "", tried.validation)
        tip = base
        if len(green) == 1:
            tip = self._landed(green[0][1])
        elif green:
            tip = self._land(base, [w for i, _tried in green for w in parts[i]])  # checked together
        passed = {i for i, _tried in green}
        for i, part in enumerate(parts):
            red = alone[i]
            if i in passed:
                continue
            if len(part) == 1 and red is not None:  # fails by itself on the loop's branch
                self.failed.append((Outcome(part[0], failure=red[0], validation=red[1]), base))
            else:
                tip = self._land(tip, part, red if tip == base else None)
        return tip


def split(group: Sequence[Worker], count: int) -> list[list[Worker]]:
    """`group` in `count` parts of nearly equal size, in order."""
    size, extra = divmod(len(group), count)
    parts, at = [], 0
    for i in range(count):
        end = at + size + (1 if i < extra else 0)
        parts.append(list(group[at:end]))
        at = end
    return [p for p in parts if p]


def names(group: Sequence[Worker]) -> tuple[str, ...]:
    return tuple(w.name for w in group)


def blame(root: Path, lanes: Lanes, verify: Verify, failed: Outcome, base: str) -> Outcome:
    """The task a branch that fails on `base` by itself fails beside: the landing of the loop's
    branch from which its own changes fail, looked for among the landings since it left the
    loop's branch first, then among the `BLAME_WINDOW` before. None when they fail even on the
    oldest: the branch fails alone."""
    worker = failed.worker
    assert worker.branch is not None
    fork = worktrees.fork_point(root, worker.branch, base)
    since_fork = worktrees.count_landings(root, fork, base)
    points = worktrees.landings(root, base, since_fork + BLAME_WINDOW)  # oldest first; the last is red

    def fails_at(index: int) -> Callable[[Path], bool]:
        def job(lane: Path) -> bool:
            worktrees.reset_to(lane, points[index][0])
            if not worktrees.apply_work(lane, worker.branch or "", base):
                return True
            return lanes.check(verify, lane)[0] is not None

        return job

    split_at = max(0, len(points) - since_fork - 1)  # the fork: failing there, look before it
    first = first_failing(lanes, fails_at, split_at, len(points) - 1)
    if first == split_at and split_at > 0:
        first = first_failing(lanes, fails_at, 0, split_at)
    found = LANDED_TASK.match(points[first][1]) if first > 0 else None
    failed.beside = found.group(1) if found else None
    return failed


def first_failing(
    lanes: Lanes, fails_at: Callable[[int], Callable[[Path], bool]], low: int, high: int
) -> int:
    """The first index in [low, high] at which `fails_at` fails, knowing it fails at `high`
    (and from there on). As many probes at once as the lanes allow but one (the train's), the
    first round's first at `low` (a branch that fails alone is said at once); one lane: `low`,
    then halving."""
    width = max(1, lanes.count - 1)
    probes = [low] if width == 1 else sorted({low + (high - low) * k // width for k in range(width)})
    while low < high:
        bad = lanes.map([fails_at(i) for i in probes])
        failing = [i for i, b in zip(probes, bad, strict=True) if b]
        high = min(failing, default=high)
        passing = [i for i, b in zip(probes, bad, strict=True) if not b and i < high]
        low = max(passing) + 1 if passing else low
        if width == 1:
            probes = [(low + high) // 2]
        else:
            probes = sorted({low + (high - low) * k // width for k in range(width)})
    return high

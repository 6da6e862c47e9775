"""The merge train: approved branches landed together, verified once, split on red.

Waiting for each branch's verification before the next starts makes a slow test suite the
loop's pace. The train merges a batch of ready branches in a scratch worktree (never on the
loop's branch) and runs the loop's checks once: green, the loop's branch is fast-forwarded to
the batch. Beside that check, in the lanes free then, each of its branches is checked alone
(once per tip of the loop's branch), then the branches queued behind it: red, the branches
that fail alone are known at once and the rest stays queued for the next batch; one behind
the batch that fails alone is known a batch sooner. When every branch passes alone, the
batch without each part is checked: the largest tree that passes lands, and the part it left
out is split again on the new tip, down to the branches that break it. When only the trees without either
of two single branches pass, those two fail beside each other, which names the pair. While a
batch is checked, the next may be checked on top of it (`Train.tried_on`): a tree that passed
is not checked again (`Checked`). The loop's branch only ever moves to a verified tree.

A branch that fails by itself on the loop's branch is handed on at once to `blame`, which runs
beside the next batches rather than before them: from which landing of the loop's branch do
its own changes fail? It searches the landings since the branch left and `BLAME_WINDOW`
before, several probes at once, and names the task of that landing. What each outcome means
for the task is `loop.core.workflow.merge_ended`'s to say; this module only carries the train
out.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

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


@dataclass
class Later(Generic[T]):
    """What a job returns when its result is another lane's check under way (`Checked`): `then`
    awaits it once the job's lane is free, so no lane is held only to wait."""

    then: Callable[[], T]


Job = Callable[[Path], "T | Later[T]"]
"""A job run in a lane: its result, or one to await without the lane (`Later`)."""


class Skipped(Exception):
    """A job called off while it waited for a lane (`Lanes.call_off`)."""


class Halted(Exception):
    """Nothing more lands in this run of the train: a signal ended a check early (what it
    checked is not known to pass), or the loop stopped or let go of a branch meanwhile."""


@dataclass
class Outcome:
    """What the train made of one branch: landed (`sha`), a conflict, or a failure (`beside`:
    the task it fails beside, passing alone; `flaky`: checked again, the same tree passed)."""

    worker: Worker
    sha: str | None = None
    conflict: worktrees.Merge | None = None
    failure: str | None = None
    beside: str | None = None
    validation: Mapping[str, Any] | None = None
    flaky: bool = False


Result = tuple[str | None, Mapping[str, Any] | None]
"""The loop's checks' failure on a tree (None when green), and their results."""
Red = tuple[str, Mapping[str, Any] | None]
"""The loop's checks' failure on a tree, and their results."""
Verify = Callable[[Path, threading.Event | None], Result]
"""The loop's checks run in a folder: their failure (None when green) and their results; raises
`Halted` when a signal ended them, or the event given was set (nobody needs them any more)."""


class Lanes:
    """The train's scratch worktrees: one per check it may run at once (`count`), each made
    ready for the checks once (`ready`: the project's copied files and setup)."""

    def __init__(self, root: Path, loop: str, count: int, ready: Callable[[Path], None] | None) -> None:
        self.root = root
        self.loop = loop
        self.count = max(1, count)
        self.ready = ready
        self._free: list[Path] = []
        self._unmade = list(range(self.count, 0, -1))
        """The lanes not made yet (their numbers): the lowest is made first."""
        self._lock = threading.Lock()
        self._making = threading.Lock()
        self._planning = threading.Lock()
        """Held while a blame plans a round and takes its lanes (`round`)."""
        self._wanted = 0
        """Jobs that hold a lane or wait for one."""
        self._changed = threading.Condition(self._lock)
        """Notified when a lane is freed, a job ends or a wait is called off (`call_off`)."""
        self.checks = 0
        """The checks run in the lanes so far (a batch, its branches alone, its parts, a blame's
        probes)."""

    @contextmanager
    def lane(self, unless: threading.Event | None = None) -> Iterator[Path]:
        """A scratch worktree of its own for one job: a free one, else a new one while fewer
        than `count` exist, else the next one freed. `Skipped` when `unless` is called off
        first."""
        with self._changed:
            called_off = unless.is_set if unless is not None else lambda: False
            self._changed.wait_for(lambda: self._free or self._unmade or called_off())
            if called_off():
                raise Skipped
            path = self._free.pop() if self._free else None
            number = self._unmade.pop() if path is None else 0
        if path is None:
            try:
                with self._making:  # git worktree add, one at a time
                    path = worktrees.scratch(self.root, self.loop, "HEAD", number)
                if self.ready is not None:
                    self.ready(path)
            except BaseException:
                with self._changed:
                    self._unmade.append(number)
                    self._changed.notify_all()
                raise
        try:
            yield path
        finally:
            with self._changed:
                self._free.append(path)
                self._changed.notify_all()

    def call_off(self, unless: threading.Event) -> None:
        """Jobs started with `unless` that have no lane yet give up waiting (`Skipped`)."""
        with self._changed:
            unless.set()
            self._changed.notify_all()

    def run(self, job: Job[T], unless: threading.Event | None = None) -> T:
        with self._lock:
            self._wanted += 1
        return self._run(job, unless)

    def _run(self, job: Job[T], unless: threading.Event | None = None) -> T:
        try:
            with self.lane(unless) as path:
                done = job(path)
        finally:
            with self._changed:
                self._wanted -= 1
                self._changed.notify_all()
        return done.then() if isinstance(done, Later) else done

    def spare(self) -> int:
        """How many lanes no job holds or waits for now."""
        with self._lock:
            return max(0, self.count - self._wanted)

    def start(self, jobs: Sequence[Job[T]], unless: threading.Event | None = None) -> list[Future[T]]:
        """Each job started in a lane of its own (up to `count` at once, the rest waiting for a
        lane); their futures, in order. A job still waiting for a lane when `unless` is called
        off is `Skipped`."""
        with self._lock:
            self._wanted += len(jobs)
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.count, len(jobs))), thread_name_prefix="lane")
        started: list[Future[T]] = []
        try:
            for job in jobs:
                started.append(pool.submit(self._run, job, unless))
            return started
        finally:
            pool.shutdown(wait=False)
            with self._changed:
                self._wanted -= len(jobs) - len(started)  # what could not start waits for nothing
                self._changed.notify_all()

    def quiet(self) -> None:
        """Wait until no job holds a lane or waits for one: the checks nobody waits for ended."""
        with self._changed:
            self._changed.wait_for(lambda: self._wanted == 0)

    def map(self, jobs: Sequence[Job[T]]) -> list[T]:
        """Each job in a lane of its own, up to `count` at once; their results in order."""
        if len(jobs) <= 1 or self.count == 1:
            return [self.run(job) for job in jobs]
        started = self.start(jobs)
        wait(started)  # every job ended before any result (or error) is taken
        return [done.result() for done in started]

    def round(self, pick: Callable[[int, int], list[int]], job: Callable[[int], Job[T]]) -> dict[int, T]:
        """A blame's round: `pick` is told how many lanes it may take (those spare but one,
        which the train keeps for its next batch; at least one), and how many when the round
        ends the search (every lane spare: its worker waits for the blame, the next batch
        waits one check at most). Its probes' jobs start before another round counts the
        lanes spare; each probe's result."""
        with self._planning:
            spare = self.spare()
            chosen = pick(max(1, min(self.count - 1, spare - 1)), max(1, spare))
            started = self.start([job(i) for i in chosen])
        wait(started)
        return {i: done.result() for i, done in zip(chosen, started, strict=True)}

    def check(
        self, verify: Verify, where: Path, unless: threading.Event | None = None
    ) -> tuple[str | None, Mapping[str, Any] | None]:
        """The checks in a lane; ended early (`Halted`) once `unless` is set."""
        with self._lock:
            self.checks += 1
        return verify(where, unless)


class Checked:
    """The checks' results by tree: a tree being checked, or found green, is not checked again,
    whatever commit holds it. So a batch checked on top of the one before it (`Train.ahead`)
    lands as soon as that one did, its tree already green. A red tree is checked again when
    asked (the checks may have been flaky)."""

    def __init__(self, keep: int = 200) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._trees: dict[str, Future[Result]] = {}

    def claim(self, tree: str) -> tuple[Future[Result], bool]:
        """The check of `tree` known or under way (False), else a new one that the caller runs
        (True, then `settle`), in one step: two jobs never both check one tree."""
        with self._lock:
            known = self._trees.get(tree)
            if known is not None:
                return known, False
            mine: Future[Result] = Future()
            self._trees[tree] = mine
            while len(self._trees) > self.keep:
                del self._trees[next(iter(self._trees))]
            return mine, True

    def settle(self, tree: str, mine: Future[Result], check: Callable[[], Result]) -> Result:
        """`check` run for the tree claimed (`claim`), its result kept when green."""
        try:
            done = check()
        except BaseException as exc:
            self._forget(tree, mine)
            mine.set_exception(exc)
            raise
        if done[0] is not None:
            self._forget(tree, mine)
        mine.set_result(done)
        return done

    def result(self, tree: str, check: Callable[[], Result]) -> Result:
        """The checks' result on `tree`: the one known or under way, else `check` run now (as
        when the one under way was called off)."""
        while True:
            found, mine = self.claim(tree)
            if mine:
                return self.settle(tree, found, check)
            try:
                return found.result()
            except Exception:  # called off (or failed) where it ran: checked here instead
                continue

    def _forget(self, tree: str, check: Future[Result]) -> None:
        with self._lock:
            if self._trees.get(tree) is check:
                del self._trees[tree]


@dataclass
class Tried:
    """A group of branches merged onto a commit in a lane and, when any merged, checked."""

    tip: str
    merged: list[Outcome]
    conflicted: list[tuple[Worker, worktrees.Merge, str]]
    failure: str | None = None
    validation: Mapping[str, Any] | None = None
    known: bool = False
    """Its tree's result was known already (`Checked`): no check of its own ran."""

    @property
    def green(self) -> bool:
        return bool(self.merged) and not self.conflicted and self.failure is None

    @property
    def red(self) -> bool:
        """Merged without a conflict, and the checks failed: what it says is about this tree."""
        return bool(self.merged) and not self.conflicted and self.failure is not None


@dataclass
class Split:
    """A red group's parts and the group without each, the last part left out first (earlier
    branches land first); `tries`: those trees merged and checked."""

    parts: list[list[Worker]]
    without: list[list[Worker]]
    tries: list[Tried] = field(default_factory=list)


def split_of(group: Sequence[Worker], count: int) -> Split:
    """`group` split in `count` parts (no split under two)."""
    count = min(count, len(group))
    if count < 2:
        return Split([], [])
    parts = split(group, count)
    return Split(parts, [[w for w in group if w not in part] for part in reversed(parts)])


@dataclass
class Train:
    """One run of the train over a batch, on the loop's branch at `root`."""

    root: Path
    verify: Verify
    land: Callable[[Tried], bool]
    """Asked to land a green tree: the loop's branch fast-forwarded to its tip and its branches
    landed; False when they may not land any more (the train halts)."""
    lanes: Lanes
    fails: Callable[[Outcome, str], None]
    """Told at once of a branch that fails by itself on the loop's branch, with the commit it
    fails on: what it fails beside is `blame`'s to find, unless the split showed it (`beside`)."""
    passed_alone: dict[str, str] = field(default_factory=dict)
    """A branch's tip: the newest tip of the loop's branch it passed the checks alone on, kept
    across runs (`passed`)."""
    checked: Checked = field(default_factory=Checked)
    """The trees checked so far, kept across runs."""
    ahead: str | None = None
    """The tip of the batch while it is checked: the next batch may be checked on top of it
    meanwhile (`checked`)."""
    stale: threading.Event = field(default_factory=threading.Event)
    """Set once the batch will not land whole: a check on top of it is needless."""
    outcomes: list[Outcome] = field(default_factory=list)
    """Landed branches and conflicts, in order."""
    conflicted: list[tuple[Worker, worktrees.Merge, str]] = field(default_factory=list)
    """Branches that conflicted in a stack, with the commit they were merged onto: retried
    alone on what landed before their conflict is said (it may be with a branch that failed)."""

    def run(self, batch: Sequence[Worker], behind: Sequence[Worker] = ()) -> list[Outcome]:
        """Land what can land of `batch`; the outcomes of the rest (those that fail on their
        own go to `fails` as soon as that is known). `behind`: branches queued after the batch,
        checked alone in the lanes it leaves free (one that fails goes to `fails`)."""
        tip = self._land(worktrees.head(self.root), list(batch), behind=behind, batch=True)
        retry, self.conflicted = self.conflicted, []
        for worker, clash, onto in retry:
            if onto == tip:  # merged onto this very tree: the conflict is with the loop's branch
                self.outcomes.append(Outcome(worker, conflict=clash))
            else:  # it met a batch-mate that may not have landed: alone on what did
                tip = self._land(tip, [worker])
        self.outcomes += [Outcome(worker, conflict=clash) for worker, clash, _onto in self.conflicted]
        return self.outcomes

    def tried_on(self, ahead: str, group: Sequence[Worker], off: threading.Event) -> Job[Tried]:
        """The job: `group` merged on top of the batch being checked (`ahead`, its tip) and
        checked, for `checked` to know; called off with `off`."""
        return self._tried(ahead, group, off)

    def _tried(
        self,
        base: str,
        group: Sequence[Worker],
        unless: threading.Event | None = None,
        ended: threading.Event | None = None,
        batch: bool = False,
        freed: Callable[[], None] | None = None,
    ) -> Job[Tried]:
        """The job: `group` merged one by one onto `base` in a lane (a branch that conflicts is
        left out), then checked; nothing done once `unless` is set (a check under way ends).
        A tree whose check is under way in another lane is awaited without a lane (`Later`).
        `ended`: called off as the job ends, before its lane is free for a job waiting for it.
        `batch`: the run's batch, whose tip is `ahead` while it is checked. `freed`: called
        when the job's lane is about to be free for the wait."""

        def job(lane: Path) -> Tried | Later[Tried]:
            tried = Tried(base, [], [])
            awaited = False
            try:
                if unless is not None and unless.is_set():
                    return tried
                worktrees.reset_to(lane, base)
                for worker in group:
                    assert worker.branch is not None
                    done = worktrees.merge_commit(lane, worker.branch, message(worker))
                    if not done.merged:
                        tried.conflicted.append((worker, done, tried.tip))
                        continue
                    assert done.sha is not None
                    tried.tip = done.sha
                    tried.merged.append(Outcome(worker, sha=done.sha))
                if not tried.merged:
                    return tried
                if batch:
                    self.ahead = tried.tip
                tree = worktrees.tree(lane)
                found, mine = self.checked.claim(tree)
                if not mine:  # known, or under way in another lane: awaited with this lane free
                    if freed is not None:
                        freed()
                    awaited = True
                    return Later(partial(self._awaited, tried, tree, found, unless, ended, batch))
                tried.failure, tried.validation = self.checked.settle(
                    tree, found, partial(self.lanes.check, self.verify, lane, unless)
                )
                return tried
            finally:
                if not awaited:
                    self._ended(ended, batch)

        return job

    def _awaited(
        self,
        tried: Tried,
        tree: str,
        other: Future[Result],
        unless: threading.Event | None,
        ended: threading.Event | None,
        batch: bool,
    ) -> Tried:
        """`tried`'s result: the check of its tree under way in another lane, awaited with no
        lane held; checked in a lane of its own when that one is called off."""

        def again(lane: Path) -> Result:
            worktrees.reset_to(lane, tried.tip)
            tried.known = False
            return self.lanes.check(self.verify, lane, unless)

        try:
            tried.known = True
            try:
                tried.failure, tried.validation = other.result()
            except Exception:  # called off where it ran
                tried.failure, tried.validation = self.checked.result(
                    tree, partial(self.lanes.run, again, unless)
                )
            return tried
        finally:
            self._ended(ended, batch)

    def _ended(self, ended: threading.Event | None, batch: bool) -> None:
        """A job's end: a batch's is checked (nothing is checked ahead of it any more), and
        `ended` called off."""
        if batch:
            self.ahead = None
        if ended is not None:
            self.lanes.call_off(ended)

    def _landed(self, tried: Tried) -> str:
        """A green tree landed (`land`): the loop's branch's new tip."""
        for outcome in tried.merged:
            outcome.validation = tried.validation
        if not self.land(tried):
            raise Halted
        self.outcomes += tried.merged
        return tried.tip

    def _land(
        self,
        base: str,
        group: Sequence[Worker],
        red: Red | None = None,
        behind: Sequence[Worker] = (),
        batch: bool = False,
    ) -> str:
        """Land what can land of `group` on `base`; the loop's branch's new tip. `red`: the
        checks' failure when `group` on `base` is already known to fail (what a batch left
        out of what landed of it), which is not verified again. A group's check runs beside
        checks of its branches alone, then of those `behind` it, in the lanes free then: red, a
        branch that fails alone goes to `fails` and the rest waits for the next batch; none
        does, the group is split. `batch`: the run's batch (`ahead`)."""
        if red is None:
            members = list(group) if len(group) > 1 else []  # a group of one is checked alone
            tips: dict[str, str] = {}
            unknown: list[Worker] = []
            if (members or behind) and self.lanes.count > 2:
                tips = {w.name: worktrees.head(self.root, w.branch or "") for w in [*members, *behind]}
                unknown = [w for w in [*members, *behind] if self.passed_alone.get(tips[w.name]) != base]
            needless, late, moved = threading.Event(), threading.Event(), threading.Event()
            guesses: list[tuple[Worker, Future[Tried]]] = []

            def check_alone(few: Sequence[Worker]) -> None:
                jobs = [self._tried(base, [w], needless if w in members else moved) for w in few]
                guesses.extend(zip(few, self.lanes.start(jobs, late), strict=True))

            alone = max(0, self.lanes.spare() - 1) if unknown else 0
            check_alone(unknown[:alone])
            # the batch's job last: its tip (`ahead`) is there once the lanes above are taken; when
            # another lane checks its tree already, its own lane checks one more branch alone
            job = self._tried(
                base, group, ended=late, batch=batch, freed=lambda: check_alone(unknown[alone:][:1])
            )
            first = self.lanes.start([job])[0]
            tries: list[Tried] = []
            try:
                tried = first.result()  # green, it lands without waiting for the other checks
                ours = [(w, g) for w, g in guesses if w in members]  # with any the batch's lane took
                if batch and not tried.green:  # it will not land whole
                    self.lanes.call_off(self.stale)
                if tried.red:  # the checks already under way (`late` was called off) are awaited
                    tries = [g.result() for _w, g in ours if not isinstance(g.exception(), Skipped)]
            finally:
                needless.set()  # a check nobody needs any more ends
            self.conflicted += tried.conflicted
            later = [(w, g) for w, g in guesses if w not in members]
            if tried.merged and tried.failure is None:  # green (any branch that conflicts left out)
                tip = self._landed(tried)
                if tried.known:  # landed at once: checks behind it on what was the tip are needless
                    self.lanes.call_off(moved)
                self._heard(base, tips, later)
                return tip
            self._heard(base, tips, later)
            if not tried.merged:
                return base
            red = (tried.failure or "", tried.validation)
            group = [o.worker for o in tried.merged]
            for one in tries:
                if one.green:
                    passed(self.passed_alone, tips[one.merged[0].worker.name], base)
            failing = [t for t in tries if t.red]
            for one in failing:  # fails by itself: the rest stays queued for the next batch
                worker = one.merged[0].worker
                self.fails(Outcome(worker, failure=one.failure, validation=one.validation), base)
            if failing:
                return base
        if len(group) == 1:
            self.fails(Outcome(group[0], failure=red[0], validation=red[1]), base)
            return base
        ahead = split_of(group, max(2, self.lanes.count))
        ahead.tries = self.lanes.map([self._tried(base, rest) for rest in ahead.without])
        return self._split(base, group, red, ahead)

    def _heard(
        self, base: str, tips: Mapping[str, str], checks: Sequence[tuple[Worker, Future[Tried]]]
    ) -> None:
        """The checks alone of branches behind a batch, awaited: one that passed is known to,
        on `base`; one that failed goes to `fails`. One that conflicts, or had no lane or was
        called off or could not merge, waits for its batch, which says why."""
        for worker, check in checks:
            if check.exception() is not None:
                continue
            one = check.result()
            if one.green:
                passed(self.passed_alone, tips[worker.name], base)
            elif one.red:
                self.fails(Outcome(worker, failure=one.failure, validation=one.validation), base)

    def _split(self, base: str, group: Sequence[Worker], red: Red, done: Split) -> str:
        """A red group whose tree without each part was checked: the first that passed lands
        and the part it left out is split again beside it. When just the trees without either
        of two single branches passed, and another failed again, each of the two fails beside
        the other: the one left out is told so (anything else is no sure pair: a blame looks,
        checking the tree again). None passed: more than one part breaks the group
        (`_each_alone`)."""
        green = [(rest, tried) for rest, tried in zip(done.without, done.tries, strict=True) if tried.green]
        if not green:
            known = {
                names(rest): (tried.failure or "", tried.validation)
                for rest, tried in zip(done.without, done.tries, strict=True)
                if tried.red
            }
            return self._each_alone(base, done.parts, known)
        left_out = [[w for w in group if w not in rest] for rest, _tried in green]
        tip = self._landed(green[0][1])
        repeated = any(t.red for t in done.tries)
        if repeated and len(left_out) == 2 and len(left_out[0]) == len(left_out[1]) == 1:
            beside = left_out[1][0].task
            self.fails(Outcome(left_out[0][0], failure=red[0], validation=red[1], beside=beside), tip)
            return tip
        return self._land(tip, left_out[0], red)  # still red beside them

    def _each_alone(self, base: str, parts: list[list[Worker]], known: dict[tuple[str, ...], Red]) -> str:
        """More than one part breaks the group: each part checked alone on `base` (at once;
        with two parts their checks were the ones above). A branch that fails alone goes to
        `fails` at once, those that pass are landed together (not checked again when `known`
        says that tree is red), a larger part that fails is split again."""
        alone = [known.get(names(part)) for part in parts]
        unknown = [i for i, red in enumerate(alone) if red is None]
        green: list[tuple[int, Tried]] = []
        for i, tried in zip(
            unknown, self.lanes.map([self._tried(base, parts[i]) for i in unknown]), strict=True
        ):
            if tried.green:
                green.append((i, tried))
            elif tried.red:
                alone[i] = (tried.failure or "", tried.validation)
        done = {i for i, _tried in green}
        for i, part in enumerate(parts):
            red = alone[i]
            if len(part) == 1 and red is not None:  # fails by itself on the loop's branch
                self.fails(Outcome(part[0], failure=red[0], validation=red[1]), base)
                done.add(i)
        tip = base
        if len(green) == 1:
            tip = self._landed(green[0][1])
        elif green:  # checked together, unless that tree was one of the group without a part
            together = [w for i, _tried in green for w in parts[i]]
            tip = self._land(base, together, known.get(names(together)))
        for i, part in enumerate(parts):
            if i not in done:
                red = alone[i]
                tip = self._land(tip, part, red if tip == base else None)
        return tip


def passed(known: dict[str, str], tip: str, base: str, keep: int = 1000) -> None:
    """A branch's tip passed alone on `base`, the newest it did; the oldest tips go past
    `keep`."""
    known.pop(tip, None)
    known[tip] = base
    while len(known) > keep:
        del known[next(iter(known))]


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


def blame(
    root: Path,
    lanes: Lanes,
    verify: Verify,
    failed: Outcome,
    base: str,
    known: Mapping[str, str] | None = None,
) -> Outcome:
    """The task a branch that fails on `base` by itself fails beside: the landing of the loop's
    branch from which its own changes fail, looked for among the landings since it left the
    loop's branch and the `BLAME_WINDOW` before (it may have left after the one it fails
    beside), several at once; only those since it passed alone, when it did (`known`:
    `Train.passed_alone`). None when they fail even on the oldest: the branch fails alone."""
    worker = failed.worker
    assert worker.branch is not None
    fork = worktrees.fork_point(root, worker.branch, base)
    since_fork = worktrees.count_landings(root, fork, base)
    points = worktrees.landings(root, base, since_fork + BLAME_WINDOW)  # oldest first; the last is red
    green = (known or {}).get(worktrees.head(root, worker.branch))
    shas = [sha for sha, _subject in points[:-1]]
    low = shas.index(green) + 1 if green in shas else 0

    def fails_at(index: int) -> Callable[[Path], bool]:
        def job(lane: Path) -> bool:
            worktrees.reset_to(lane, points[index][0])
            if not worktrees.apply_work(lane, worker.branch or "", base):
                return True
            return lanes.check(verify, lane, None)[0] is not None

        return job

    first = first_failing(lanes, fails_at, low, len(points) - 1)
    if first is None:
        failed.flaky = True
        return failed
    found = LANDED_TASK.match(points[first][1]) if first > 0 else None
    failed.beside = found.group(1) if found else None
    return failed


def first_failing(
    lanes: Lanes, fails_at: Callable[[int], Callable[[Path], bool]], low: int, high: int
) -> int | None:
    """The first index in [low, high] at which `fails_at` fails, knowing it failed at `high`
    once (and fails from there on). Each round's probes run at once, in the lanes the train
    can spare (`Lanes.round`, `probes`). An index is named on two failures: its probe's and
    the one at `high`, or two at `high`. None when `high` passes when checked again (a flaky
    check)."""
    top, again, first = high, False, True
    while True:
        if low >= high and (again or high < top):
            return high
        bad = lanes.round(partial(probes, low, high, top, first=first, again=again), fails_at)
        chosen, first = list(bad), False
        if not bad.get(top, True):
            return None
        again = again or top in bad
        high = min([high] + [i for i in chosen if bad[i]])
        low = max([low] + [i + 1 for i in chosen if not bad[i] and i < high])


def probes(low: int, high: int, top: int, most: int, last: int, first: bool, again: bool) -> list[int]:
    """A round's probes over [low, high) in at most `most` lanes, or every place left when
    that ends the search in `last` lanes. Until a probe failed, `top` (the tree it failed on)
    is one more place to look when that takes no more probes, else it rides in the last round
    with a lane to spare (or has a round of its own at the end). The first round's first is
    `low` (a branch that fails alone is said at once); with one lane, `low`, then halving."""
    unsure = high == top and not again
    if high - low + unsure <= last:
        return [*range(low, high), *([top] if unsure else [])]
    if most == 1:
        return [low if first else (low + high + unsure) // 2]
    chosen = spread(low, high, most)
    if not unsure:
        return chosen
    wider = spread(low, high + 1, most)
    if len(wider) <= len(chosen):
        return wider
    if len(chosen) == high - low and len(chosen) < most:  # the last round
        chosen.append(top)
    return chosen


def spread(low: int, high: int, most: int) -> list[int]:
    """Probes over [low, high): the fewest that take as few rounds as `most` would, so the lanes
    they leave serve the train and other blames (14 landings: 4 probes, two rounds, as with 7)."""
    span = high - low
    rounds = 1
    while most**rounds < span:
        rounds += 1
    width = 2
    while width**rounds < span:
        width += 1
    width = min(width, most)
    return sorted({low + span * k // width for k in range(width)})

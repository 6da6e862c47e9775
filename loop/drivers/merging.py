"""How a loop of workers keeps its tasks apart and brings them together: in a git repository
each task works in its own worktree on its branch and approved branches merge into the loop's
branch by the merge train (`loop.drivers.train`: batches verified once, bisected on red; or
`rebase`, one at a time); outside git (or with
`--isolation locks`) the workers share the tree and file locks keep them apart.

Which branch merges next and when is `loop.core.scheduler`'s to say; what a merge's outcome
means is `loop.core.workflow.merge_ended`'s. This part carries merges out and cleans up what a
runner killed mid-merge left behind.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from loop.core import scheduler, workflow
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.core.scheduler import LOCKS, WORKTREE, Step, Worker
from loop.drivers import resolve, train
from loop.drivers.session import Session
from loop.drivers.verification import Verification
from loop.repo import landing, worktrees

Apply = Callable[[Callable[[LoopState], Step | None]], Step | None]
"""Decide on the state under the loop's lock and carry the step out (the driver's `apply`)."""


class Merges:
    """The loop's isolation (worktrees or locks), its branch, and its merge queue carried out."""

    def __init__(self, session: Session, verification: Verification, strategy: str, apply: Apply) -> None:
        self.session = session
        self.verification = verification
        self.strategy = strategy
        """`merge` (a merge commit) or `rebase` (replayed onto the loop's branch, then a fast-forward)."""
        self.apply = apply
        self.isolation = LOCKS
        self.loop_branch: str | None = None
        self.loop_name = ""
        self.verifications = 0
        """The checks the train ran on merged trees in this run (a batch, its halves, a blame)."""
        self.landings: list[int] = []
        """How many tasks each move of the loop's branch landed, in this run."""
        self.before: str | None = None
        """The loop's branch before the batch landing now (what its backup refs point at)."""
        self.ready_scratch: Callable[[Path], None] | None = None
        """Makes the train's scratch worktree ready for the checks, once (the project's copied
        files and setup: `loop.drivers.worktree_setup.Ready.scratch`)."""

    @property
    def root(self) -> Path:
        return self.session.ws.root

    def choose(self, state: LoopState, wanted_here: str | None) -> None:
        """Worktrees in a git repository (unless `--isolation locks`), file locks elsewhere; the
        loop's branch is the one checked out in the workspace, kept on the board for later runs."""
        self.loop_name = worktrees.loop_id(state.started_at)
        board = scheduler.board_of(state)
        wanted = wanted_here or (board.isolation if board.loop_branch else None)
        repo = worktrees.is_repo(self.root)
        if wanted == WORKTREE and not repo:
            raise LoopdeckError(f"--isolation worktree needs a git repository; {self.root} is not one")
        if wanted == LOCKS or not repo:
            self.isolation = LOCKS
            return
        branch = board.loop_branch or worktrees.current_branch(self.root)
        if branch is None:
            raise LoopdeckError(
                f"{self.root} is on a detached HEAD: check out the branch the tasks should merge "
                "into, or give --isolation locks"
            )
        self.isolation, self.loop_branch = WORKTREE, branch

    def worktree(self, worker: Worker) -> worktrees.Worktree | None:
        if self.isolation != WORKTREE or self.loop_branch is None:
            return None
        return worktrees.ensure(self.root, self.loop_name, worker.task, self.loop_branch)

    def recover(self, state: LoopState | None) -> None:
        """What a runner killed mid-merge left: a merge of one of this loop's branches under way
        in the workspace, never concluded, is undone (the queue still holds the task, which is
        merged again); worktrees of tasks this loop finished go."""
        if self.isolation != WORKTREE or state is None:
            return
        board = scheduler.board_of(state)
        root = self.root
        under_way = worktrees.merging_branch(root)
        if under_way is not None:
            ours = {
                worktrees.head(root, w.branch)
                for w in board.workers
                if w.branch and worktrees.branch_exists(root, w.branch)
            }
            if under_way in ours:
                worktrees.abandon(root)
                self.session.warn("a merge a stopped runner left under way was undone")
        for path in worktrees.leftovers(root, self.loop_name):
            if not any(w.worktree and Path(w.worktree).resolve() == path for w in board.workers):
                task = path.name
                if task in board.done:
                    worktrees.remove(root, path, worktrees.branch_for(self.loop_name, task))
        worktrees.tidy(root, self.loop_name)

    def merged_before(self, step: Step) -> Step:
        """Queued branches a crash left merged complete their tasks: never done twice."""
        if self.isolation != WORKTREE:
            return step
        for worker in step.board.workers:
            queued = worker.status == scheduler.QUEUED  # only the queue merges: nothing else can be in
            if queued and worker.branch and worktrees.merged(self.root, worker.branch):
                step = scheduler.merged(step, worker.name, None)
                if worker.worktree:
                    worktrees.remove(self.root, Path(worker.worktree), worker.branch)
        return step

    def tidy(self) -> None:
        if self.isolation == WORKTREE:
            worktrees.remove_scratch(self.root, self.loop_name)
            worktrees.tidy(self.root, self.loop_name)

    def verify_tree(self, cwd: Path | None = None, counted: bool = True) -> str | None:
        """The loop's verification commands on the tree as it is now (the workspace, or a
        task's rebased worktree); their failures. `counted`: a failure is one in the run's
        tally (the train counts a branch's failed landing once, not each step of a bisection)."""
        self.verification.validation = None
        if not self.verification:
            return None
        state = self.session.store.read()
        return self.verification.run(state.iteration if state is not None else 0, cwd, counted)

    def merge_next(self) -> bool:
        """Land the next batch of the queue (`loop.core.scheduler.next_batch`) by the merge
        train (`loop.drivers.train`): merged and verified together in a scratch worktree, the
        loop's branch fast-forwarded to what passed, the rest handed back (a conflict with its
        hunks, a verification failure with its output and the task it fails beside). The rebase
        strategy lands one branch at a time. One batch per call, so commands and ended workers
        are seen between batches."""
        if self.isolation != WORKTREE or self.loop_branch is None:
            return False
        state = self.session.store.read()
        batch = scheduler.next_batch(state) if state is not None else []
        if not batch:
            return False
        now = self.session.now
        try:
            if worktrees.current_branch(self.root) != self.loop_branch:
                raise LoopdeckError(
                    f"the workspace is not on the loop's branch {self.loop_branch} any more; "
                    "check it out again"
                )
            self.before = landing.head_of(self.root, self.loop_branch)  # journaled: undo trusts it
            for worker in batch:  # a backup ref per task before it may land: `loopdeck undo` checks it
                landing.backup(self.root, self.loop_name, worker.task, self.loop_branch)
            if self.strategy == "rebase":
                self._rebase_one(batch[0])
                return True
            ran = train.Train(self.root, self.loop_name, self._verify_in, self._landed, ready=self._ready())
            outcomes = ran.run(batch)
        except LoopdeckError as exc:
            why = str(exc)
            first = batch[0].name
            self.apply(lambda s: workflow.merge_ended(s, first, sha=None, problem=why, now=now()))
            return True
        self.verifications += ran.verifications
        self.session.tally.verify_failures += sum(o.failure is not None for o in outcomes)
        for outcome in outcomes:
            if outcome.sha is None:
                self._handed_back(outcome)
        return True

    def _ready(self) -> Callable[[Path], None] | None:
        """The scratch worktree's preparation, when the train has checks to run there."""
        return self.ready_scratch if self.verification else None

    def _verify_in(self, where: Path) -> tuple[str | None, dict[str, Any] | None]:
        failure = self.verify_tree(where, counted=False)  # a branch's failure is counted once
        return failure, self.verification.validation

    def _landed(self, outcomes: list[train.Outcome]) -> None:
        """The loop's branch moved to a verified batch: each task in it is merged."""
        now = self.session.now
        self.landings.append(len(outcomes))
        for outcome in outcomes:
            worker, sha, checked = outcome.worker, outcome.sha, outcome.validation
            assert sha is not None
            self.session.tally.commits.append(sha)
            self.apply(
                lambda s, n=worker.name, h=sha, c=checked: workflow.merge_ended(  # type: ignore[misc]
                    s, n, sha=h, validation=c, before=self.before, now=now()
                )
            )
            if worker.worktree:
                worktrees.remove(self.root, Path(worker.worktree), worker.branch)

    def _handed_back(self, outcome: train.Outcome) -> None:
        now = self.session.now
        name, clash = outcome.worker.name, outcome.conflict
        conflicts, hunks = (clash.conflicts, clash.hunks) if clash is not None else ((), "")
        failure, beside, checked = outcome.failure, outcome.beside, outcome.validation
        intent = resolve.intent(self.root, self.session, outcome.worker, self.loop_branch, conflicts)
        self.apply(
            lambda s: workflow.merge_ended(
                s,
                name,
                sha=None,
                conflicts=conflicts,
                hunks=hunks,
                failure=failure,
                validation=checked,
                beside=beside,
                intent=intent,
                now=now(),
            )
        )

    def _rebase_one(self, worker: Worker) -> None:
        """The rebase strategy: one branch replayed onto the loop's, verified, fast-forwarded."""
        sha, failure, clash = self._rebased(worker)
        checked = self.verification.validation if clash is None else None
        if clash is not None or failure is not None:
            self._handed_back(train.Outcome(worker, conflict=clash, failure=failure, validation=checked))
            return
        assert sha is not None
        self._landed([train.Outcome(worker, sha=sha, validation=checked)])

    def _rebased(self, worker: Worker) -> tuple[str | None, str | None, worktrees.Merge | None]:
        """The rebase strategy: the task's branch replayed onto the loop's, verified in its
        worktree, then the loop's branch fast-forwarded to it (a straight history)."""
        assert self.loop_branch is not None
        wt = self.worktree(worker)
        assert wt is not None
        outcome = worktrees.rebase(wt, self.loop_branch)
        if not outcome.merged:
            return None, None, outcome
        failure = self.verify_tree(wt.path)
        if failure is not None:
            return None, failure, None
        return worktrees.fast_forward(self.root, wt.branch), None, None

    def what_changed(self, worker: Worker) -> tuple[bool, list[str], str]:
        """With worktrees: did the turn change anything, which files has the task's branch
        changed, and what the worker must hear if its work cannot be taken (conflict markers
        left). Its commit goes on the task's branch; a merge it was resolving concludes only
        with no conflict left."""
        wt = self.worktree(worker) if worker.worktree else None
        if wt is None:
            return False, [], ""
        try:
            left = worktrees.unresolved(wt.path)
            if left:
                note = (
                    "CONFLICT MARKERS REMAIN in "
                    + ", ".join(left)
                    + ": resolve them (keep both sides' intent)."
                )
                return False, [], note
            worktrees.commit_all(wt, f"loopdeck: task {worker.task} ({worker.name}, turn {worker.turns})")
            touched = worktrees.changed_files(wt, self.loop_branch)
            # the task's branch, not only this turn: a turn that goes on from an earlier
            # attempt (a restarted runner) may find nothing left to do
            return bool(touched), touched, ""
        except LoopdeckError as exc:
            self.session.warn(str(exc))
            return False, [], ""

"""How a loop of workers keeps its tasks apart and brings them together: in a git repository
each task works in its own worktree on its branch and approved branches merge into the loop's
branch by the merge train (`loop.drivers.train`: batches verified once, split on red; or
`rebase`, one at a time); outside git (or with
`--isolation locks`) the workers share the tree and file locks keep them apart.

Which branch merges next and when is `loop.core.scheduler`'s to say; what a merge's outcome
means is `loop.core.workflow.merge_ended`'s. This part carries merges out and cleans up what a
runner killed mid-merge left behind.

The train runs beside the driver, in a thread of its own: a check of minutes would otherwise
hold every worker's next turn. Only the driver's thread touches the state and the loop's
branch: the train posts what it found (`_posted`), asks there before anything lands (`_land`,
which refuses a branch the loop let go of meanwhile), and `merge_next` applies the posts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import Any

from loop.core import scheduler, workflow
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.core.scheduler import LOCKS, WORKTREE, Step, Worker
from loop.drivers import resolve, train
from loop.drivers.session import Session
from loop.drivers.verification import Verification, validation_of
from loop.repo import landing, worktrees

Apply = Callable[[Callable[[LoopState], Step | None]], Step | None]
"""Decide on the state under the loop's lock and carry the step out (the driver's `apply`)."""


class Merges:
    """The loop's isolation (worktrees or locks), its branch, and its merge queue carried out."""

    def __init__(
        self, session: Session, verification: Verification, strategy: str, apply: Apply, checks: int = 1
    ) -> None:
        self.session = session
        self.verification = verification
        self.strategy = strategy
        """`merge` (a merge commit) or `rebase` (replayed onto the loop's branch, then a fast-forward)."""
        self.apply = apply
        self.isolation = LOCKS
        self.loop_branch: str | None = None
        self.loop_name = ""
        self.checks = max(1, checks)
        """How many checks the train may run at once (its lanes: a batch, its branches alone, a
        red batch's parts, a blame's probes)."""
        self.lanes: train.Lanes | None = None
        self._running = False
        """A run of the train is under way (it posts `_train_ended` last)."""
        self._blames: set[str] = set()
        """Branches whose blame runs (worker names): out of the next batches until it is said."""
        self._posted: SimpleQueue[Callable[[], None]] = SimpleQueue()
        """What the train and the blames did, for the driver's thread to apply, in order."""
        self._passed_alone: dict[str, str] = {}
        """What the train found passing alone (`train.Train.passed_alone`)."""
        self._checked = train.Checked()
        """The trees the train checked (`train.Checked`)."""
        self._train: train.Train | None = None
        """The train's last run (under way while `_running`)."""
        self._batch: set[str] = set()
        """The workers of that run's batch."""
        self._ahead_of: str | None = None
        """The batch tip the next batch was last checked on top of."""
        self._ahead: tuple[set[str], threading.Event] | None = None
        """That check's batch (workers) and the event that calls it off."""
        self._halt = threading.Event()
        """The loop stops: no check starts any more, nothing more lands."""
        self._iteration = 0
        """The loop's iteration when the batch started, for the checks' journal lines."""
        self.before: str | None = None
        """The loop's branch before the batch landing now (what its backup refs point at)."""
        self.ready_scratch: Callable[[Path], None] | None = None
        """Makes a scratch worktree of the train ready for the checks, once (the project's
        copied files and setup: `loop.drivers.worktree_setup.Ready.scratch`)."""

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
        self.finish()
        if self.lanes is not None:
            self.lanes.quiet()  # a check a green batch made needless ends in its lane
        if self.isolation == WORKTREE:
            worktrees.remove_scratch(self.root, self.loop_name)
            worktrees.tidy(self.root, self.loop_name)

    def verify_tree(self, cwd: Path | None = None) -> str | None:
        """The loop's verification commands on the tree as it is now (the workspace, or a
        task's rebased worktree); their failures (a check a signal ended is one)."""
        self.verification.validation = None
        if not self.verification:
            return None
        state = self.session.store.read()
        return self.verification.run(state.iteration if state is not None else 0, cwd)

    def merge_next(self, settle: bool = False) -> bool:
        """What the train did since the last call applied; then, when it is free, the next batch
        of the queue (`loop.core.scheduler.next_batch`) started on it: merged and verified
        together in a scratch worktree, the loop's branch fast-forwarded to what passed, the
        rest handed back (a conflict with its hunks, a verification failure with its output and
        the task it fails beside). The rebase strategy lands one branch at a time, here.
        `settle`: return once that batch is done (with none left, once every blame is). True
        when anything was applied or started."""
        if self.isolation != WORKTREE or self.loop_branch is None:
            return False
        moved = self._apply_posted()
        if self._running:
            self._check_ahead()
            if self._train is not None and self._train.stale.is_set():
                self._call_off_ahead()
            if not settle:
                return moved
            self._wait(lambda: not self._running)
            moved = True
        state = self.session.store.read()
        batch = scheduler.next_batch(state, held=self._blames) if state is not None else []
        if state is None or not batch:
            if settle and self._blames:
                self._wait(lambda: not self._blames)
                return True
            return moved
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
        except LoopdeckError as exc:
            self._problem(batch[0].name, str(exc))
            return True
        if self.lanes is None:
            ready = self.ready_scratch if self.verification else None
            self.lanes = train.Lanes(self.root, self.loop_name, self.checks, ready)
        self._iteration = state.iteration
        self._running = True
        behind = scheduler.behind_batch(state, held=self._blames)
        self._train = train.Train(
            self.root,
            self._verify_in,
            self._asked_to_land,
            self.lanes,
            self._failing,
            self._passed_alone,
            self._checked,
        )
        self._batch = {w.name for w in batch}
        if self._ahead is not None and self._ahead[0] != self._batch:
            self._call_off_ahead()  # what it checked is not this batch
        threading.Thread(
            target=self._run_train, args=(self._train, batch, behind), name="train", daemon=True
        ).start()
        if settle:
            self._wait(lambda: not self._running)
        return True

    def finish(self, search: bool = True) -> None:
        """Wait for the train and every blame under way, applying what they did. `search`
        False (the loop stops): no check starts any more and nothing more lands."""
        if not search:
            self._halt.set()
        self._wait(lambda: not self._running and not self._blames)
        self._call_off_ahead()  # nothing lands after this

    def _wait(self, done: Callable[[], bool]) -> None:
        """Apply what the train posts, as it posts it, until `done`."""
        while not done():
            self._posted.get()()

    def _apply_posted(self) -> bool:
        """What the train posted so far, applied in order; True when there was any."""
        moved = False
        while True:
            try:
                step = self._posted.get_nowait()
            except Empty:
                return moved
            step()
            moved = True

    def _run_train(self, ran: train.Train, batch: list[Worker], behind: list[Worker]) -> None:
        """The train's thread: one batch carried out (the branches `behind` it checked alone
        beside it); what it comes to posted, then its end."""
        post = self._posted.put
        try:
            outcomes = ran.run(batch, behind)
            post(lambda: self._ran(outcomes))
        except train.Halted:  # the loop stops, or let a branch go: the queue keeps the rest
            pass
        except LoopdeckError as exc:
            why = str(exc)
            post(lambda: self._problem(batch[0].name, why))
        except BaseException as exc:  # a bug: raised on the driver's thread, not lost here
            bug = exc
            post(lambda: _raise(bug))
        finally:
            post(self._train_ended)

    def _train_ended(self) -> None:
        self._running = False

    def _check_ahead(self) -> None:
        """While a batch is checked, the batch that would follow it is merged on top of it and
        checked too, once, in a lane nothing else asks for: when the first lands whole, the
        second's tree is green already (`train.Checked`) and lands without a check of its own."""
        ran, lanes = self._train, self.lanes
        ahead = ran.ahead if ran is not None else None
        if ran is None or lanes is None or ahead is None or ahead == self._ahead_of or ran.stale.is_set():
            return
        if self._blames:  # a search for what a branch fails beside has the lanes first
            return
        state = self.session.store.read()
        if state is None or lanes.count < 3 or lanes.spare() < 2:
            return
        then = scheduler.following_batch(state, held=self._blames | self._batch)
        if then:
            self._call_off_ahead()
            off = threading.Event()
            self._ahead_of, self._ahead = ahead, ({w.name for w in then}, off)
            checked = lanes.start([ran.tried_on(ahead, then, off)], off)[0]
            checked.add_done_callback(self._ahead_ended)

    def _call_off_ahead(self) -> None:
        """The check ahead under way, if any, ends (or never starts)."""
        if self._ahead is not None and self.lanes is not None:
            self.lanes.call_off(self._ahead[1])
        self._ahead = None

    def _ahead_ended(self, checked: Future[train.Tried]) -> None:
        """A lane's thread: a check ahead ended; a bug in it is raised on the driver's thread."""
        bug = checked.exception()
        if bug is not None and not isinstance(bug, (train.Skipped, train.Halted, LoopdeckError)):
            self._posted.put(lambda: _raise(bug))

    def _asked_to_land(self, tried: train.Tried) -> bool:
        """The train's thread: may this green tree land? Answered by the driver's thread."""
        answer: Future[bool] = Future()

        def decide() -> None:
            try:
                answer.set_result(self._land(tried))
            except LoopdeckError as exc:  # git refused: the train's thread says so
                answer.set_exception(exc)

        self._posted.put(decide)
        return answer.result()

    def _land(self, tried: train.Tried) -> bool:
        """The driver's thread: a green tree lands when the loop says its branches still may
        (`loop.core.scheduler.may_land`): the loop's branch fast-forwarded to it, its tasks merged."""
        state = self.session.store.read()
        names = [o.worker.name for o in tried.merged]
        if state is None or self._halt.is_set() or not scheduler.may_land(state, names):
            return False
        worktrees.fast_forward(self.root, tried.tip)
        self._landed(tried.merged)
        return True

    def _ran(self, outcomes: list[train.Outcome]) -> None:
        """The driver's thread: a run's conflicts handed back."""
        for outcome in outcomes:
            if outcome.sha is None:
                self._handed_back(outcome)

    def _failing(self, outcome: train.Outcome, base: str) -> None:
        """The train's thread: a branch that fails by itself, posted at once. The driver's
        thread blames it beside the next batches, or hands it back as it is when the split
        already named what it fails beside or the loop stops."""

        def failed() -> None:
            if outcome.beside is not None or self._halt.is_set():
                self._blamed(outcome)
            else:
                self._blame(outcome, base)

        self._posted.put(failed)

    def _blame(self, failed: train.Outcome, base: str) -> None:
        """A blame of its own thread for a branch that fails by itself (`train.blame`)."""
        assert self.lanes is not None
        lanes = self.lanes

        def search() -> None:
            found = failed
            try:
                found = train.blame(self.root, lanes, self._verify_in, failed, base, self._passed_alone)
            except (LoopdeckError, train.Halted):
                pass  # said without the task it fails beside
            finally:
                self._posted.put(lambda: self._blamed(found))

        self._blames.add(failed.worker.name)
        threading.Thread(target=search, name="blame", daemon=True).start()

    def _blamed(self, outcome: train.Outcome) -> None:
        self._blames.discard(outcome.worker.name)
        self.session.tally.verify_failures += 1
        self._handed_back(outcome)

    def _problem(self, name: str, why: str) -> None:
        now = self.session.now
        self.apply(lambda s: workflow.merge_ended(s, name, sha=None, problem=why, now=now()))

    def _verify_in(
        self, where: Path, unless: threading.Event | None = None
    ) -> tuple[str | None, dict[str, Any] | None]:
        """The loop's checks in a lane, from the train's threads (a branch's failure is counted
        once, when it is handed back); ended early once `unless` is set."""
        if self._halt.is_set():
            raise train.Halted
        if not self.verification:
            return None, None
        verdict = self.verification.verdict(self._iteration, where, unless)
        if verdict.interrupted:
            raise train.Halted
        return verdict.failure, validation_of(verdict)

    def _landed(self, outcomes: list[train.Outcome]) -> None:
        """The loop's branch moved to a verified batch: each task in it is merged."""
        now = self.session.now
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
        failure, beside, checked, flaky = outcome.failure, outcome.beside, outcome.validation, outcome.flaky
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
                flaky=flaky,
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


def _raise(exc: BaseException) -> None:
    raise exc

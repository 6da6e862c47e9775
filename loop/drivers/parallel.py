"""Driver 3: `loopdeck run --workers N`, parallel workers over a task graph.

The runner's sibling for graphs: it claims the loop as `loopdeck run` does, then keeps up to N
workers busy. It gathers facts (the graph, the workers' turns read by `loop.turn` exactly as
the runner reads its agent's, their diffs, audits, merges, the control queue) and carries out
what is decided: the workers' rules by `loop.core.scheduler`, the loop's transitions by
`loop.core.engine` (how many turns may start, what a turn's cost, limit or refused tool means,
escalations, the ending), the state written by `loop.drivers.writer` before the graph.

In a git repository each task works in its own worktree on its branch (`loop.repo.worktrees`);
approved branches merge into the loop's branch one at a time, the verification commands run on
the merged tree, and a conflict goes back to the task's worker with its hunks. Outside git (or
with `--isolation locks`) the workers share the tree and file locks keep them apart.

Every worker dies with the runner: processes are stopped on every way out (completion, stop,
escalation, SIGINT, SIGTERM, an exception), and each is also told to die with its parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from loop import agents, verify
from loop.agents.turn import judge
from loop.core import engine, scheduler, workflow
from loop.core.errors import LoopdeckError
from loop.core.model import Aggregate, LoopState, Result
from loop.core.scheduler import LOCKS, WORKTREE, Step, Task, Worker
from loop.core.timeutil import utcnow
from loop.drivers import writer
from loop.drivers.runner import EXIT_SIGINT, EXIT_SIGTERM, Options, Runner, spent_data
from loop.processes import agent
from loop.processes.workers import Ended, Pool, files_mark
from loop.repo import worktrees
from loop.repo.gitargv import NO_DIFF_PROGRAMS, git_argv
from loop.sources import taskgraph as graph
from loop.store import control
from loop.store.journal import Event, Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore

WORKER_ENV = "LOOPDECK_WORKER"
"""Set in each worker's environment: its name (the task is in `LOOPDECK_TASK`)."""


@dataclass(frozen=True)
class Parallel:
    """What `--workers` adds to the runner's options."""

    graph: Path
    workers: int = 4
    audit: str | None = None
    """A verification command (allowlisted): exit 0 approves a worker's task."""
    audit_agent: str | None = None
    """An agent command given the task and the worker's output: exit 0 approves."""
    audit_allow: tuple[str, ...] = ()
    """Commands added to the allowlist for the audit (`--verify-allow`)."""
    idle_cycle_s: float = 1.0
    """With no worker running, how often the scheduler looks again (a deadlock counts these)."""
    given: frozenset[str] = frozenset()
    """Which of the graph and the audit this command line gave (a person's choice), as
    `loop.trust` names them; the others come from the state file and must be confirmed."""
    isolation: str | None = None
    """`worktree` or `locks`; None: worktrees in a git repository, locks elsewhere."""
    strategy: str = "merge"
    """How an approved branch joins the loop's: `merge` (a merge commit) or `rebase` (replayed
    onto it, then a fast-forward)."""


class ParallelRunner:
    def __init__(
        self,
        ws: Workspace,
        options: Options,
        parallel: Parallel,
        out: Callable[[str], None] | None = None,
        now: Callable[[], datetime] = utcnow,
        runner: Runner | None = None,
    ) -> None:
        if not 1 <= parallel.workers <= scheduler.MAX_WORKERS:
            raise LoopdeckError(f"--workers takes 1 to {scheduler.MAX_WORKERS}")
        self.ws = ws
        self.options = options
        self.parallel = parallel
        self.base = runner or Runner(ws, options, out=out, now=now)
        self.store: StateStore = self.base.store
        self.journal: Journal = self.base.journal
        self.now = now
        self.pool = Pool()
        self.signal: int | None = None
        self.goal = ""
        self.audit_check: verify.Check | None = None
        self.tasks: dict[str, Task] = {}
        """The graph as last read, by id."""
        self.marks: dict[str, str] = {}
        """Worker → the progress mark of its files when its current turn started (locks)."""
        self.outputs: dict[str, str] = {}
        """Worker → its last turn's final words, for its audit."""
        self.prompts: dict[str, str] = {}
        """Worker → the prompt of its running turn (its signal is read apart from it)."""
        self.refusals: dict[str, str] = {}
        """Worker → the line saying what the sandbox refused its last turn, for its next prompt."""
        self.isolation = LOCKS
        self.loop_branch: str | None = None
        self.loop_name = ""

    # --- carrying out a step -------------------------------------------------------------------

    def apply(
        self,
        decide: Callable[[LoopState], Step | None],
        end: int | None = None,
        before: Callable[[LoopState], object] | None = None,
    ) -> Step | None:
        """Decide on the state as it is under the loop lock, and carry the decision out: the
        state and journal first (its word is final after a crash), then the graph, then the
        processes. `before` sees the new state before it is written (and may refuse it)."""
        with self.store.locked():
            state = self.store.read()
            if state is None:
                return None
            step = decide(state)
            if step is None:
                return None
            new = step.seal()
            if before is not None:
                before(new)
            result = Result(
                "allow", new, events=list(step.events), applied=step.applied, effects=step.effects, offset=end
            )
            writer.carry_out(self.ws, self.store, self.journal, state, result, self.now(), echo=self.echo)
        if step.updates:
            try:
                graph.write(self.parallel.graph, step.updates)
            except (OSError, LoopdeckError) as exc:
                self.base.event("warning", None, {"message": f"the task graph was not updated: {exc}"})
        for name in step.end:
            self.pool.stop(name)
        for worker in step.start:
            self.launch(worker)
        return step

    def echo(self, event: Event) -> None:
        self.base.echo(event)

    def sources(self, state: LoopState) -> Aggregate | None:
        try:
            return self.base.count(state)
        except Exception:  # the count is for the summary: an ending never fails on it
            return None

    # --- processes ---------------------------------------------------------------------------

    def task(self, worker: Worker) -> Task:
        """The worker's task as the graph was last read (read again if it is new)."""
        if worker.task not in self.tasks:
            self.read_graph()
        return self.tasks.get(worker.task) or Task(worker.task, worker.task, target_files=worker.files)

    def worktree(self, worker: Worker) -> worktrees.Worktree | None:
        if self.isolation != WORKTREE or self.loop_branch is None:
            return None
        return worktrees.ensure(self.ws.root, self.loop_name, worker.task, self.loop_branch)

    def launch(self, worker: Worker) -> None:
        task = self.task(worker)
        cwd = self.ws.root
        try:
            wt = self.worktree(worker)
        except LoopdeckError as exc:
            self.pool.failed.append(
                Ended(worker.name, "worker", None, 0.0, str(exc).encode(), error=str(exc))
            )
            return
        if wt is not None:
            cwd = wt.path
            if worker.rework == "conflict" and self.loop_branch:
                try:
                    worktrees.take_in(wt, self.loop_branch)  # the markers, for the worker to resolve
                except LoopdeckError as exc:
                    self.base.event("warning", None, {"message": str(exc)})
            if worker.branch != wt.branch:
                name, where = worker.name, wt
                self.apply_if(lambda s: _with_branch(s, name, where))
        prompt = scheduler.worker_prompt(self.goal, task, worker, self.refusals.pop(worker.name, None))
        log = self.ws.private_dir / "workers" / f"{worker.name}.{worker.turns:02d}.log"
        self.base.tally.iterations += 1
        backend = self.base.backends[0]  # the agent the workers run; its adapter reads their turns
        try:
            command = agents.in_sandbox(backend.choice, self.base.sandboxed().on)
            argv, uses_stdin = agent.argv_for(command, prompt, log.with_suffix(".prompt.md"))
        except ValueError as exc:
            self.pool.failed.append(
                Ended(worker.name, "worker", None, 0.0, str(exc).encode(), error=str(exc))
            )
            return
        self.prompts[worker.name] = prompt
        env = {**backend.env(), **worker_env(worker)}
        list_id = graph.list_id(self.parallel.graph)
        if list_id:
            env["CLAUDE_CODE_TASK_LIST_ID"] = list_id
        if wt is None:
            self.marks[worker.name] = files_mark(self.ws.root, worker.files)
        box = self.base.sandbox_for(
            cwd, beside=True
        )  # the task's worktree writable (or the workspace, with locks)
        self.pool.start(worker.name, "worker", argv, prompt if uses_stdin else None, cwd, log, env, box)

    def start_audit(self, worker: Worker, output: str, changed: tuple[str, ...]) -> bool:
        """Start the audit of `worker`'s turn, in its worktree with its diff's files; False when
        there is no audit (the engine's approval stands)."""
        log = self.ws.private_dir / "workers" / f"{worker.name}.{worker.turns:02d}.audit.log"
        cwd = Path(worker.worktree) if worker.worktree else self.ws.root
        env = {**os.environ, **worker_env(worker)}
        if changed:
            env["LOOPDECK_CHANGED"] = "\n".join(changed)
        if self.audit_check is not None:
            check = self.audit_check
            argv = list(check.argv) if check.argv is not None else ["sh", "-c", check.command]
            self.pool.start(
                worker.name, "audit", argv, None, cwd, log, env, self.base.sandbox_for(cwd, beside=True)
            )
            return True
        if self.parallel.audit_agent:
            prompt = audit_prompt(self.task(worker), worker, output, changed)
            argv, uses_stdin = agent.argv_for(
                self.parallel.audit_agent, prompt, log.with_suffix(".prompt.md")
            )
            box = self.base.sandbox_for(cwd, beside=True)
            self.pool.start(worker.name, "audit", argv, prompt if uses_stdin else None, cwd, log, env, box)
            return True
        return False

    def read_graph(self) -> list[Task]:
        try:
            tasks = graph.read(self.parallel.graph)
        except LoopdeckError as exc:
            self.base.event("warning", None, {"message": str(exc)})
            return []
        self.tasks = {t.id: t for t in tasks}
        return tasks

    # --- the loop ----------------------------------------------------------------------------

    def run(self, create: Callable[[], LoopState] | None = None) -> int:
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run(create)
        finally:
            self.pool.stop_all()  # whatever happened, no worker outlives the runner
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signal = signum

    def _run(self, create: Callable[[], LoopState] | None) -> int:
        if self.parallel.audit:
            allow = list(self.parallel.audit_allow)
            existing = self.store.read()
            if existing is not None and isinstance(existing.extra.get("verify_allow"), list):
                allow += [str(a) for a in existing.extra["verify_allow"]]
            self.audit_check = verify.check(self.parallel.audit, allow, cwd=self.ws.root)
        graph.read(self.parallel.graph)  # a graph that cannot be read is refused before the loop starts
        prepared = self.base.prepare(create)
        self.goal = prepared.prompt
        self.loop_name = worktrees.loop_id(prepared.started_at)
        self.choose_isolation(prepared)
        tasks = self.read_graph()
        self.recover()
        given = set(self.parallel.given)
        # The graph and audit this command line gives are recorded as confirmed before the state
        # names them: a runner killed in between left a loop its next run refused.
        configured = self.apply(
            lambda s: scheduler.reconcile(self.configure(s), tasks),
            before=lambda new: self.base.reconfirm(new, given),
        )
        if configured is None:  # nothing to write: the state as it is
            self.base.reconfirm(self.store.read() or prepared, given)
        stamp = ""
        last_cycle = 0.0
        while True:
            if self.signal is not None:
                return self.on_signal()
            changed = self.apply_commands()
            current = self.store.read()
            if current is None:
                return self.base.finish("completed", "completed", archived=True)
            state = current
            if state.status == "stopped":
                self.settle_ended(merge=False)
                self.pool.stop_all()
                return self.base.finish("stopped", "stopped by user")
            if (
                state.status == "paused"
                and self.options.headless
                and state.waiting_kind in ("escalation", "question")
            ):
                self.settle_ended()
                self.apply(workflow.headless_end)
                return self.base.finish("escalated", f"{state.waiting_reason}: needs a person")
            for ended in self.pool.poll(self.options.iteration_timeout):
                changed = True
                self.on_ended(ended)
            if self.merge_next():
                changed = True
            if changed:
                stamp = graph.stamp(self.parallel.graph)  # our own updates are not news
            if self.pool.grew():
                self.apply_if(scheduler.output_seen)
            now_stamp = graph.stamp(self.parallel.graph)
            if now_stamp != stamp:
                stamp, changed = now_stamp, True
            idle = not self.pool.running() and time.monotonic() - last_cycle >= self.parallel.idle_cycle_s
            if (changed or idle) and state.status == "running":
                last_cycle = time.monotonic()
                step = self.apply_cycle()
                stamp = graph.stamp(self.parallel.graph)
                if step is not None and step.effects.archive is not None:
                    if self.isolation == WORKTREE:
                        worktrees.tidy(self.ws.root, self.loop_name)
                    return self.base.finish(
                        "completed", str(step.effects.archive.get("reason")), archived=True
                    )
                if self.options.headless and step is not None and self.only_questions(step):
                    question = next(w.question for w in step.board.workers if w.status == scheduler.QUESTION)
                    self.settle_ended()
                    self.apply(workflow.headless_end)
                    return self.base.finish("question", f"a worker asks: {question}")
                continue
            time.sleep(self.options.poll)

    def settle_ended(self, merge: bool = True) -> None:
        """Before the run ends, every worker whose turn has ended is heard: its cost counted,
        its verdict kept, and (with `merge`) the approved branches merged. A worker finishing
        a moment before another crossed the cost limit was dropped, its task pending again.
        Turns still running are not waited for: they end with the run."""
        while True:
            ended = self.pool.poll(self.options.iteration_timeout)
            if not ended:
                break
            for one in ended:
                self.on_ended(one)
        state = self.store.read() if merge else None
        queued = len(scheduler.board_of(state).queue) if state is not None else 0
        for _ in range(queued):  # each branch tried once: a merge that fails is not retried here
            if not self.merge_next():
                break

    def choose_isolation(self, state: LoopState) -> None:
        """Worktrees in a git repository (unless `--isolation locks`), file locks elsewhere; the
        loop's branch is the one checked out in the workspace, kept on the board for later runs."""
        board = scheduler.board_of(state)
        wanted = self.parallel.isolation or (board.isolation if board.loop_branch else None)
        repo = worktrees.is_repo(self.ws.root)
        if wanted == WORKTREE and not repo:
            raise LoopdeckError(f"--isolation worktree needs a git repository; {self.ws.root} is not one")
        if wanted == LOCKS or not repo:
            self.isolation = LOCKS
            return
        branch = board.loop_branch or worktrees.current_branch(self.ws.root)
        if branch is None:
            raise LoopdeckError(
                f"{self.ws.root} is on a detached HEAD: check out the branch the tasks should merge "
                "into, or give --isolation locks"
            )
        self.isolation, self.loop_branch = WORKTREE, branch

    def apply_cycle(self) -> Step | None:
        """One scheduling pass on the graph as it is now (`loop.core.workflow.cycle`)."""
        tasks = self.read_graph()
        return self.apply(lambda s: workflow.cycle(s, tasks, self.now(), self.sources(s)))

    def only_questions(self, step: Step) -> bool:
        """Nothing runs, nothing could start, and a worker waits for an answer: with nobody
        watching (headless) the run ends and says what is asked."""
        workers = step.board.workers
        return (
            not step.start
            and not self.pool.running()
            and any(w.status == scheduler.QUESTION for w in workers)
            and all(w.status in (scheduler.QUESTION, scheduler.STALLED, scheduler.HELD) for w in workers)
        )

    def recover(self) -> None:
        """What a runner killed mid-merge left: a merge of one of this loop's branches under way
        in the workspace, never concluded, is undone (the queue still holds the task, which is
        merged again); worktrees of tasks this loop finished go."""
        if self.isolation != WORKTREE:
            return
        state = self.store.read()
        if state is None:
            return
        board = scheduler.board_of(state)
        root = self.ws.root
        under_way = worktrees.merging_branch(root)
        if under_way is not None:
            ours = {
                worktrees.head(root, w.branch)
                for w in board.workers
                if w.branch and worktrees.branch_exists(root, w.branch)
            }
            if under_way in ours:
                worktrees.abandon(root)
                self.base.event(
                    "warning", None, {"message": "a merge a stopped runner left under way was undone"}
                )
        for path in worktrees.leftovers(root, self.loop_name):
            if not any(w.worktree and Path(w.worktree).resolve() == path for w in board.workers):
                task = path.name
                if task in board.done:
                    worktrees.remove(root, path, worktrees.branch_for(self.loop_name, task))
        worktrees.tidy(root, self.loop_name)

    def configure(self, state: LoopState) -> Step:
        """This run's graph, capacity, audit and isolation into the board; workers a previous
        runner left (their processes died with it) give their tasks back to the graph, their
        branches kept for whoever takes the task next. A branch a crash left merged completes its
        task instead: it is never done twice."""
        step = scheduler.step_of(state)
        board = step.board
        for worker in board.workers:
            queued = worker.status == scheduler.QUEUED  # only the queue merges: nothing else can be in
            if (
                queued
                and worker.branch
                and self.isolation == WORKTREE
                and worktrees.merged(self.ws.root, worker.branch)
            ):
                step = scheduler.merged(step, worker.name, None)  # merged before the crash: done once
                if worker.worktree:
                    worktrees.remove(self.ws.root, Path(worker.worktree), worker.branch)
        step = scheduler.release(step)
        audit = self.parallel.audit or self.parallel.audit_agent
        step.board = replace(
            step.board,
            graph=str(self.parallel.graph),
            capacity=self.parallel.workers,
            audit=audit,
            audit_kind="agent" if self.parallel.audit_agent and not self.parallel.audit else "check",
            isolation=self.isolation,
            loop_branch=self.loop_branch,
            strategy=self.parallel.strategy,
            deferred=(),
        )
        return step

    def apply_if(self, change: Callable[[LoopState], LoopState | None]) -> None:
        with self.store.locked():
            state = self.store.read()
            if state is None:
                return
            new = change(state)
            if new is not None:
                writer.carry_out(self.ws, self.store, self.journal, state, Result("allow", new), self.now())

    def apply_commands(self) -> bool:
        """The queue, in order: a command to one worker is the scheduler's; one to the whole
        loop is the engine's, and then means what it means for the workers. A state file that
        changed under the runner (what it names unconfirmed) makes the loop wait for a person."""
        state = self.store.read()
        if state is None:
            return False
        pending = self.base.unconfirmed(state)
        if pending and state.status == "running":
            reason = (
                f"the loop names things nobody on this machine confirmed: {engine.unconfirmed_line(pending)}"
            )
            self.apply(lambda s: workflow.escalate(s, "unconfirmed", reason, self.now()))
        from loop.trust import key

        commands, _bad, end = control.read_unapplied(
            self.ws, state.control_offset, self.journal, key.reader(self.ws.root)
        )
        for cmd in commands:
            self.apply(
                lambda s, c=cmd: workflow.command(s, c, self.sources(s), self.now()),  # type: ignore[misc]
                end=cmd.end,
            )
        if end > (commands[-1].end if commands else state.control_offset):
            # lines past the last command applied (applied before, or not commands): read once
            self.apply(scheduler.step_of, end=end)
        return bool(commands)

    # --- a worker's turn, its audit, its merge -------------------------------------------------

    def on_ended(self, ended: Ended) -> None:
        state = self.store.read()
        if state is None:
            return
        worker = scheduler.board_of(state).worker(ended.name)
        if worker is None:
            return
        if ended.role == "audit":
            self.on_audited(worker, ended)
            return
        now = self.now()
        backend = self.base.backends[0]
        judged = judge(
            backend.choice.adapter,
            ended.tail,
            ended.exit_code,
            now=now,
            timed_out=ended.timed_out,
            timeout_s=self.options.iteration_timeout,
            start_error=ended.error,
            env=os.environ,
            echoed=self.prompts.pop(worker.name, ""),
        )
        text = judged.text or ""
        facts = judged.turn()
        where = Path(worker.worktree) if worker.worktree else self.ws.root  # journaled for the person
        refused = self.base.refused(ended.tail, None, backend.choice.adapter, where, worker=worker.name)
        if refused:
            self.refusals[worker.name] = refused
        self.outputs[worker.name] = text
        asked = judged.question
        self.base.tally.turns.append(
            {"iteration": worker.name, **spent_data(backend.name, judged, judged.usage)}
        )
        changed, touched, note = self.what_changed(worker)
        step = self.apply(
            lambda s: workflow.worker_turn_ended(
                s,
                facts,
                worker=worker,
                output=text,
                touched=touched,
                changed=changed,
                note=note,
                asked=asked,
                exit_code=ended.exit_code,
                duration_s=ended.duration_s,
                now=now,
            )
        )
        if step is None:
            return
        after = step.board.worker(worker.name)
        auditing = after is not None and after.status == scheduler.AUDITING
        if after is not None and auditing and not self.start_audit(after, text, tuple(touched)):
            self.on_approved(after.name, True, "")

    def what_changed(self, worker: Worker) -> tuple[bool, list[str], str]:
        """Did the turn change anything, which files has the task changed, and what the worker
        must hear if its work cannot be taken: its commit on the task's branch (worktrees; a
        merge it was resolving concluded only with no conflict left), or its files' mark (locks)."""
        if self.isolation == WORKTREE:
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
                self.base.event("warning", None, {"message": str(exc)})
                return False, [], ""
        before = self.marks.pop(worker.name, None)
        after = files_mark(self.ws.root, worker.files)
        return before is None or after != before, list(worker.files), ""

    def on_audited(self, worker: Worker, ended: Ended) -> None:
        out = verify.redact(agent.final_text(ended.tail).strip())
        approved = ended.exit_code == 0
        self.on_approved(
            worker.name, approved, f"AUDIT REJECTED YOUR WORK (exit {ended.exit_code}):\n{out[-3000:]}"
        )

    def on_approved(self, name: str, approved: bool, feedback: str) -> None:
        """The audit's word (or the engine's approval with no audit). Outside git an approved
        task is checked by the verification commands and completed here; with worktrees it
        joins the merge queue."""
        if approved and self.isolation == LOCKS:
            failure = self.verify_tree()
            if failure is not None:
                approved, feedback = False, f"VERIFICATION FAILED AFTER YOUR WORK:\n{failure}"
            elif self.options.commit:
                state = self.store.read()
                worker = scheduler.board_of(state).worker(name) if state else None
                if worker is not None:
                    self.commit(worker)
        self.outputs.pop(name, None)
        self.apply(lambda s: workflow.audited(s, name, approved, feedback, self.now()))

    def verify_tree(self, cwd: Path | None = None) -> str | None:
        """The loop's verification commands on the tree as it is now (the workspace, or a
        task's rebased worktree); their failures."""
        if not self.base.checks:
            return None
        state = self.store.read()
        return self.base.run_checks(state.iteration if state is not None else 0, cwd)

    def merge_next(self) -> bool:
        """Merge the queue's first branch into the loop's branch: verified, then committed, or
        undone and handed back (a conflict with its hunks, a verification failure with its
        output). One merge per call, so commands and ended workers are seen between merges."""
        if self.isolation != WORKTREE or self.loop_branch is None:
            return False
        state = self.store.read()
        if state is None or state.status not in ("running", "paused"):
            return False
        board = scheduler.board_of(state)
        if not board.queue:
            return False
        worker = board.worker(board.queue[0])
        if worker is None or worker.branch is None:
            return False
        root = self.ws.root
        message = f"loopdeck: merge task {worker.task} ({worker.branch})"
        try:
            if worktrees.current_branch(root) != self.loop_branch:
                raise LoopdeckError(
                    f"the workspace is not on the loop's branch {self.loop_branch} any more; "
                    "check it out again"
                )
            if self.parallel.strategy == "rebase":
                sha, failure, clash = self._rebased(worker)
            else:
                sha, failure, clash = self._merged(worker, message)
        except LoopdeckError as exc:
            why = str(exc)
            self.apply(lambda s: workflow.merge_ended(s, worker.name, sha=None, problem=why, now=self.now()))
            return True
        if clash is not None or failure is not None:
            conflicts, hunks = (clash.conflicts, clash.hunks) if clash is not None else ((), "")
            self.apply(
                lambda s: workflow.merge_ended(
                    s,
                    worker.name,
                    sha=None,
                    conflicts=conflicts,
                    hunks=hunks,
                    failure=failure,
                    now=self.now(),
                )
            )
            return True
        assert sha is not None
        self.base.tally.commits.append(sha)
        self.apply(lambda s: workflow.merge_ended(s, worker.name, sha=sha, now=self.now()))
        if worker.worktree:
            worktrees.remove(root, Path(worker.worktree), worker.branch)
        return True

    def _merged(self, worker: Worker, message: str) -> tuple[str | None, str | None, worktrees.Merge | None]:
        """The merge strategy: a merge commit on the loop's branch, verified before it is made."""
        assert worker.branch is not None
        root = self.ws.root
        outcome = worktrees.merge(root, worker.branch, message)
        if not outcome.merged:
            return None, None, outcome
        failure = self.verify_tree()
        if failure is not None:
            worktrees.abandon(root)
            return None, failure, None
        return worktrees.conclude(root, message), None, None

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
        return worktrees.fast_forward(self.ws.root, wt.branch), None, None

    def commit(self, worker: Worker) -> None:
        try:
            sha = commit_files(self.ws.root, worker.files, f"loopdeck: task {worker.task} ({worker.name})")
        except Exception as exc:  # a repo problem must not lose the run
            self.base.event("warning", None, {"message": f"commit failed: {exc}"})
            return
        if sha:
            self.base.tally.commits.append(sha)
            self.base.event("commit", None, {"sha": sha, "task": worker.task, "worker": worker.name})

    def on_signal(self) -> int:
        signum = self.signal or signal.SIGTERM
        paused = signum == signal.SIGINT
        name = signal.Signals(signum).name

        self.settle_ended(merge=False)
        self.apply(lambda s: workflow.interrupt(s, paused, f"{name} to the runner", self.now()))
        self.pool.stop_all()
        self.base.finish("interrupted" if paused else "stopped", f"{name} received")
        return EXIT_SIGINT if paused else EXIT_SIGTERM


def _with_branch(state: LoopState, name: str, wt: worktrees.Worktree) -> LoopState | None:
    """The board records the worker's branch and worktree (a crash then finds them)."""
    board = scheduler.board_of(state)
    worker = board.worker(name)
    if worker is None:
        return None
    return scheduler.keep(state.copy(), board.put(replace(worker, branch=wt.branch, worktree=str(wt.path))))


def worker_env(worker: Worker) -> dict[str, str]:
    """What a worker and its audit find in their environment: who, which task, which files
    (one a line), so an audit command can check that task's files only."""
    return {WORKER_ENV: worker.name, "LOOPDECK_TASK": worker.task, "LOOPDECK_FILES": "\n".join(worker.files)}


def audit_prompt(task: Task, worker: Worker, output: str, changed: tuple[str, ...] = ()) -> str:
    files = "\n".join(f"- {f}" for f in task.target_files) or "- (no files named)"
    diff = "\n".join(f"- {f}" for f in changed) or "- (none)"
    return (
        f"Audit the work of {worker.name} on task {task.id}: {task.subject}\n\n"
        f"{task.description.strip() or '(no description)'}\n\nFiles:\n{files}\n\n"
        f"Files its branch changed:\n{diff}\n\n"
        f"The worker's report:\n{output.strip()[-4000:]}\n\n"
        "Exit 0 to approve. Otherwise explain what is wrong: your output goes back to the worker."
    )


def commit_files(root: Path, files: tuple[str, ...], message: str) -> str | None:
    """Commit the given files only (a worker's own), leaving every other change alone; the
    new sha, or None when they did not change."""
    files = tuple(f for f in files if (root / f).exists() or _tracked(root, f))
    if not files:
        return None
    subprocess.run(
        git_argv("add", "-A", "--", *files, literal=True), cwd=root, check=True, capture_output=True
    )
    staged = subprocess.run(
        git_argv("diff", *NO_DIFF_PROGRAMS, "--cached", "--quiet", "--", *files, literal=True),
        cwd=root,
        capture_output=True,
    )
    if staged.returncode == 0:
        return None
    subprocess.run(
        git_argv("commit", "-q", "--no-verify", "-m", message, "--only", "--", *files, literal=True),
        cwd=root,
        check=True,
        capture_output=True,
    )
    head = subprocess.run(git_argv("rev-parse", "HEAD"), cwd=root, check=True, capture_output=True, text=True)
    return head.stdout.strip() or None


def _tracked(root: Path, name: str) -> bool:
    found = subprocess.run(
        git_argv("ls-files", "--error-unmatch", "--", name, literal=True), cwd=root, capture_output=True
    )
    return found.returncode == 0

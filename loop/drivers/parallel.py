"""Driver 3: `loopdeck run --workers N`, parallel workers over a task graph.

The runner's sibling for graphs: it claims the loop as `loopdeck run` does, then keeps up to N
workers busy. It gathers facts (the graph, the workers' turns read by `loop.turn` exactly as
the runner reads its agent's, their diffs, audits, merges, the control queue) and carries out
what is decided: the workers' rules by `loop.core.scheduler`, the loop's transitions by
`loop.core.engine` (how many turns may start, what a turn's cost, limit or refused tool means,
escalations, the ending), the state written by `loop.drivers.writer` before the graph.

In a git repository each task works in its own worktree on its branch (`loop.repo.worktrees`);
approved branches land on the loop's branch by the merge train (`loop.drivers.train`): a batch
merged in a scratch worktree, the verification commands run once on it, a red batch split down to
the branches that break it; a conflict goes back to the task's worker with its hunks. Outside git (or
with `--isolation locks`) the workers share the tree and file locks keep them apart.

Every worker dies with the runner: processes are stopped on every way out (completion, stop,
escalation, SIGINT, SIGTERM, an exception), and each is also told to die with its parent.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from queue import Empty, SimpleQueue

from loop import agents
from loop.core import engine, scheduler, workflow
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState, Result, Settings
from loop.core.prompts import audit_prompt
from loop.core.scheduler import LOCKS, WORKTREE, Step, Task, Worker
from loop.core.timeutil import utcnow
from loop.drivers import writer
from loop.drivers.children import Children, Signals
from loop.drivers.claim import Claim
from loop.drivers.commits import Commits, commit_files
from loop.drivers.merging import Merges
from loop.drivers.pulls import SECRETS, Pulls
from loop.drivers.report import Report
from loop.drivers.session import Options, Session
from loop.drivers.turn import Turns
from loop.drivers.verification import Verification
from loop.drivers.worktree_setup import Ready, WorktreeSetup
from loop.processes import agent
from loop.processes.workers import Ended, Pool, files_mark
from loop.repo import worktrees
from loop.sources import taskgraph as graph
from loop.store import control
from loop.store.paths import Workspace
from loop.trust import key as trust_key
from loop.verify import Check, check
from loop.verify import redact as redact_output

__all__ = ["WORKER_ENV", "Parallel", "ParallelRunner", "commit_files", "worker_env"]

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
    worktree_setup: WorktreeSetup = field(default_factory=WorktreeSetup)
    """Files copied and commands run once per new worktree, and the workers' ports."""
    batch: int = scheduler.BATCH
    """How many approved branches the merge train lands together at most (1: one at a time)."""
    merge_checks: int = scheduler.CHECKS
    """How many checks the merge train may run at once when it looks for what broke a batch."""
    pr: bool = False
    """Each task a pull request on the repository's host (`loop.drivers.pulls`): its checks and
    reviews go back to its worker until green and approved, then it is landed there."""


class ParallelRunner:
    """Up to N workers over a task graph, built from the parts the runner is built from."""

    def __init__(
        self,
        ws: Workspace,
        options: Options,
        parallel: Parallel,
        out: Callable[[str], None] | None = None,
        now: Callable[[], datetime] = utcnow,
        settings: Settings | None = None,
    ) -> None:
        if not 1 <= parallel.workers <= scheduler.MAX_WORKERS:
            raise LoopdeckError(f"--workers takes 1 to {scheduler.MAX_WORKERS}")
        self.ws = ws
        self.options = options
        self.parallel = parallel
        self.now = now
        self.policy = engine.WORKERS.watched(options.headless)
        """How this run stands to the loop, as the rules read it (watched, or headless)."""
        settings = settings or Settings()
        self.session = Session(ws, options, out, now)
        self.signals = Signals()
        self.turns = Turns(self.session)
        # The loop is claimed as the runner claims it: one local process drives it, and
        # `status` and `resume` read the state's driver to find it.
        self.claim = Claim(self.session, settings, engine.RUNNER.watched(options.headless))
        self.verification = Verification(self.session, settings, self.turns, Children(), self.signals)
        self.commits = Commits(self.session)
        self.report = Report(self.session, self.claim)
        self.merges = Merges(
            self.session, self.verification, parallel.strategy, self.apply, parallel.merge_checks
        )
        self.pulls = Pulls(self.session, self.merges, self.apply) if parallel.pr else None
        self.children = self.verification.children
        if parallel.pr:  # the host's token stays with the driver: no child sees it
            self.children.hidden = frozenset(SECRETS)
        self.ready = Ready(
            parallel.worktree_setup, self.session, self.turns, self.verification.children, self.signals
        )
        self.merges.ready_scratch = self.ready.scratch  # the train's checks get what a worker's do
        self.pool = Pool()
        self.preparing: set[str] = set()
        """Workers whose new worktree is being made ready (`launch`), by name."""
        self.prepared: SimpleQueue[tuple[str, worktrees.Worktree, str | None]] = SimpleQueue()
        """Setups done: the worker, its worktree, and the problem when it failed."""
        self.goal = ""
        self.audit_check: Check | None = None
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
        session = self.session
        with session.store.locked():
            state = session.store.read()
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
            writer.carry_out(
                self.ws, session.store, session.journal, state, result, self.now(), echo=session.echo
            )
        if step.updates:
            try:
                graph.write(self.parallel.graph, step.updates)
            except (OSError, LoopdeckError) as exc:
                session.warn(f"the task graph was not updated: {exc}")
        for name in step.end:
            self.pool.stop(name)
        for worker in step.start:
            self.launch(worker)
        return step

    def apply_if(self, change: Callable[[LoopState], LoopState | None]) -> None:
        session = self.session
        with session.store.locked():
            state = session.store.read()
            if state is None:
                return
            new = change(state)
            if new is not None:
                writer.carry_out(
                    self.ws, session.store, session.journal, state, Result("allow", new), self.now()
                )

    # --- processes ---------------------------------------------------------------------------

    def task(self, worker: Worker) -> Task:
        """The worker's task as the graph was last read (read again if it is new)."""
        if worker.task not in self.tasks:
            self.read_graph()
        return self.tasks.get(worker.task) or Task(worker.task, worker.task, target_files=worker.files)

    def launch(self, worker: Worker) -> None:
        """The worker's turn started, in its worktree; a new worktree is made ready first (files
        copied, setup run: `Ready.prepare`) in a thread of its own, so a long setup holds back
        no other worker: `start_prepared` starts the turn once it is done."""
        try:
            wt = self.merges.worktree(worker)
        except LoopdeckError as exc:
            self.pool.failed.append(
                Ended(worker.name, "worker", None, 0.0, str(exc).encode(), error=str(exc))
            )
            return
        if wt is not None and self.ready.needed(wt.path):
            env = self.worker_env(worker)
            self.preparing.add(worker.name)
            threading.Thread(target=self.prepare, args=(worker, wt, env), name="setup", daemon=True).start()
            return
        self.start_turn(worker, wt)

    def prepare(self, worker: Worker, wt: worktrees.Worktree, env: dict[str, str]) -> None:
        """A setup's own thread: the worktree made ready, then said to the driver's thread."""
        problem: str | None = None
        try:
            self.ready.prepare(worker.name, worker.task, wt.path, env)
        except LoopdeckError as exc:
            problem = str(exc)
        except BaseException as exc:  # said as the turn's failure to start, not lost in a thread
            problem = f"the worktree's setup failed: {exc}"
        finally:
            self.prepared.put((worker.name, wt, problem))

    def start_prepared(self) -> bool:
        """The turns of workers whose worktree is ready now started (a worker stopped meanwhile
        is not); a setup that failed is that turn's failure to start. True when any was."""
        moved = False
        while True:
            try:
                name, wt, problem = self.prepared.get_nowait()
            except Empty:
                return moved
            moved = True
            self.preparing.discard(name)
            state = self.session.store.read()
            worker = scheduler.board_of(state).worker(name) if state is not None else None
            if worker is None or worker.status != scheduler.RUNNING:
                continue
            if problem is not None:
                self.pool.failed.append(Ended(name, "worker", None, 0.0, problem.encode(), error=problem))
                continue
            self.start_turn(worker, wt)

    def start_turn(self, worker: Worker, wt: worktrees.Worktree | None) -> None:
        cwd = self.ws.root if wt is None else wt.path
        if wt is not None:
            self.into_worktree(worker, wt)
        prompt = scheduler.worker_prompt(
            self.goal, self.task(worker), worker, self.refusals.pop(worker.name, None)
        )
        log = self.ws.private_dir / "workers" / f"{worker.name}.{worker.turns:02d}.log"
        self.session.tally.iterations += 1
        backend = self.turns.backends[0]  # the agent the workers run; its adapter reads their turns
        try:
            command = agents.in_sandbox(backend.choice, self.turns.sandboxed().on)
            argv, uses_stdin = agent.argv_for(command, prompt, log.with_suffix(".prompt.md"))
        except ValueError as exc:
            self.pool.failed.append(
                Ended(worker.name, "worker", None, 0.0, str(exc).encode(), error=str(exc))
            )
            return
        self.prompts[worker.name] = prompt
        env = self.children.clean({**backend.env(), **self.worker_env(worker)})
        list_id = graph.list_id(self.parallel.graph)
        if list_id:
            env["CLAUDE_CODE_TASK_LIST_ID"] = list_id
        if wt is None:
            self.marks[worker.name] = files_mark(self.ws.root, worker.files)
        box = self.turns.sandbox_for(
            cwd, beside=True
        )  # the task's worktree writable (or the workspace, with locks)
        self.pool.start(worker.name, "worker", argv, prompt if uses_stdin else None, cwd, log, env, box)

    def worker_env(self, worker: Worker) -> dict[str, str]:
        """`worker_env`, with the worker's slot 1..N and its port base (`LOOPDECK_WORKER`,
        `LOOPDECK_PORT_BASE`): held while the worker holds a slot (`Board.active`)."""
        state = self.session.store.read()
        live = [w.name for w in scheduler.board_of(state).active()] if state is not None else []
        return {**worker_env(worker), **self.ready.env(worker.name, live)}

    def into_worktree(self, worker: Worker, wt: worktrees.Worktree) -> None:
        """A worker's worktree before its turn: the conflict it must resolve taken in, and the
        board told its branch (a crash then finds them)."""
        loop_branch = self.merges.loop_branch
        if worker.rework == "conflict" and loop_branch:
            try:
                worktrees.take_in(wt, loop_branch)  # the markers, for the worker to resolve
            except LoopdeckError as exc:
                self.session.warn(str(exc))
        if worker.branch != wt.branch:
            name, where = worker.name, wt
            self.apply_if(lambda s: _with_branch(s, name, where))

    def start_audit(self, worker: Worker, output: str, changed: tuple[str, ...]) -> bool:
        """Start the audit of `worker`'s turn, in its worktree with its diff's files; False when
        there is no audit (the engine's approval stands)."""
        log = self.ws.private_dir / "workers" / f"{worker.name}.{worker.turns:02d}.audit.log"
        cwd = Path(worker.worktree) if worker.worktree else self.ws.root
        env = self.children.clean({**os.environ, **self.worker_env(worker)})
        if changed:
            env["LOOPDECK_CHANGED"] = "\n".join(changed)
        box = self.turns.sandbox_for(cwd, beside=True)
        if self.audit_check is not None:
            audit = self.audit_check
            argv = list(audit.argv) if audit.argv is not None else ["sh", "-c", audit.command]
            self.pool.start(worker.name, "audit", argv, None, cwd, log, env, box)
            return True
        if self.parallel.audit_agent:
            prompt = audit_prompt(self.task(worker), worker, output, changed)
            argv, uses_stdin = agent.argv_for(
                self.parallel.audit_agent, prompt, log.with_suffix(".prompt.md")
            )
            self.pool.start(worker.name, "audit", argv, prompt if uses_stdin else None, cwd, log, env, box)
            return True
        return False

    def read_graph(self) -> list[Task]:
        try:
            tasks = graph.read(self.parallel.graph)
        except LoopdeckError as exc:
            self.session.warn(str(exc))
            return []
        self.tasks = {t.id: t for t in tasks}
        return tasks

    # --- the loop ----------------------------------------------------------------------------

    def run(self, create: Callable[[], LoopState] | None = None) -> int:
        with self.signals.noted():
            try:
                self.start(create)
                return self.drive()
            finally:
                self.pool.stop_all()  # whatever happened, no worker outlives the runner

    def start(self, create: Callable[[], LoopState] | None) -> None:
        """Claim the loop, choose the isolation, tidy what a crash left, and write this run's
        graph, capacity and audit into the board."""
        if self.parallel.audit:
            allow = list(self.parallel.audit_allow)
            existing = self.session.store.read()
            if existing is not None and isinstance(existing.extra.get("verify_allow"), list):
                allow += [str(a) for a in existing.extra["verify_allow"]]
            self.audit_check = check(self.parallel.audit, allow, cwd=self.ws.root)
        graph.read(self.parallel.graph)  # a graph that cannot be read is refused before the loop starts
        prepared = self.claim.prepare(create, self.turns.sandbox_line(), self.verification.admit)
        self.goal = prepared.prompt
        self.merges.choose(prepared, self.parallel.isolation)
        if self.pulls is not None:
            self.pulls.prepare()
        tasks = self.read_graph()
        self.merges.recover(self.session.store.read())
        given = set(self.parallel.given)
        # The graph and audit this command line gives are recorded as confirmed before the state
        # names them: a runner killed in between left a loop its next run refused.
        configured = self.apply(
            lambda s: scheduler.reconcile(self.configure(s), tasks),
            before=lambda new: self.claim.reconfirm(new, given),
        )
        if configured is None:  # nothing to write: the state as it is
            self.claim.reconfirm(self.session.store.read() or prepared, given)

    def drive(self) -> int:
        """Keep the workers busy until the loop ends: commands, ended turns and merges first,
        then a scheduling cycle when something changed (or nothing runs)."""
        stamp = ""
        last_cycle = 0.0
        while True:
            if self.signals.caught is not None:
                return self.on_signal()
            changed = self.apply_commands()
            state = self.session.store.read()
            if state is None:
                return self.report.finish("completed", "completed", archived=True)
            ended = self.ended_now(state)
            if ended is not None:
                return ended
            for one in self.pool.poll(self.options.iteration_timeout):
                changed = True
                self.on_ended(one)
            if self.start_prepared():
                changed = True
            if self.pulls is not None and self.pulls.poll():
                changed = True
            if self.merges.merge_next():
                changed = True
            if changed:
                stamp = graph.stamp(self.parallel.graph)  # our own updates are not news
            if self.pool.grew():
                self.apply_if(scheduler.output_seen)
            now_stamp = graph.stamp(self.parallel.graph)
            if now_stamp != stamp:
                stamp, changed = now_stamp, True
            idle = not self.busy() and time.monotonic() - last_cycle >= self.parallel.idle_cycle_s
            if scheduler.cycle_due(state, changed, idle):
                last_cycle = time.monotonic()
                finished = self.cycle(state)
                if finished is not None:
                    return finished
                stamp = graph.stamp(self.parallel.graph)
                continue
            time.sleep(self.options.poll)

    def busy(self) -> bool:
        """A worker's turn, audit or worktree setup is under way."""
        return bool(self.pool.running() or self.preparing)

    def ended_now(self, state: LoopState) -> int | None:
        """The run's exit status when the loop was stopped, or a run nobody watches ends."""
        if state.status == "stopped":
            self.settle_ended(merge=False)
            self.pool.stop_all()
            return self.report.finish("stopped", "stopped by user")
        ending = engine.run_ends(self.policy, state)
        if ending is None:
            return None
        self.settle_ended()
        self.apply(workflow.headless_end)
        return self.report.finish(*ending)

    def cycle(self, state: LoopState) -> int | None:
        """One scheduling pass; the run's exit status when the loop completed, or when a run
        nobody watches has only a worker's question left."""
        step = self.apply_cycle()
        if step is not None and step.effects.archive is not None:
            self.merges.tidy()
            return self.report.finish("completed", str(step.effects.archive.get("reason")), archived=True)
        asking = scheduler.only_asking(step, self.busy()) if step is not None else None
        ending = engine.run_ends(self.policy, state, asking=asking) if asking is not None else None
        if ending is None:
            return None
        self.settle_ended()
        self.apply(workflow.headless_end)
        return self.report.finish(*ending)

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
        if not merge:
            self.merges.finish(search=False)  # nothing more lands, no check starts
            return
        state = self.session.store.read()
        queued = len(scheduler.board_of(state).queue) if state is not None else 0
        for _ in range(queued + 1):  # each batch once: a branch that fails goes back, not retried
            if not self.merges.merge_next(settle=True):
                break
        self.merges.finish()

    def apply_cycle(self) -> Step | None:
        """One scheduling pass on the graph as it is now (`loop.core.workflow.cycle`)."""
        tasks = self.read_graph()
        return self.apply(lambda s: workflow.cycle(s, tasks, self.now(), self.session.counted(s)))

    def configure(self, state: LoopState) -> Step:
        """This run's graph, capacity, audit and isolation into the board; workers a previous
        runner left (their processes died with it) give their tasks back to the graph, their
        branches kept for whoever takes the task next. A branch a crash left merged completes its
        task instead: it is never done twice."""
        step = scheduler.release(self.merges.merged_before(scheduler.step_of(state)))
        audit = self.parallel.audit or self.parallel.audit_agent
        step.board = replace(
            step.board,
            graph=str(self.parallel.graph),
            capacity=self.parallel.workers,
            audit=audit,
            audit_kind="agent" if self.parallel.audit_agent and not self.parallel.audit else "check",
            isolation=self.merges.isolation,
            loop_branch=self.merges.loop_branch,
            strategy=self.parallel.strategy,
            batch=self.parallel.batch,
            checks=self.parallel.merge_checks,
            pr=self.parallel.pr,
            deferred=(),
        )
        return step

    def apply_commands(self) -> bool:
        """The queue, in order: a command to one worker is the scheduler's; one to the whole
        loop is the engine's, and then means what it means for the workers. A state file that
        changed under the runner (what it names unconfirmed) makes the loop wait for a person."""
        session = self.session
        state = session.store.read()
        if state is None:
            return False
        pending = self.claim.unconfirmed(state)
        if pending:
            self.apply(lambda s: workflow.unconfirmed(s, pending, self.now()))
        commands, _bad, end = control.read_unapplied(
            self.ws, state.control_offset, session.journal, trust_key.reader(self.ws.root)
        )
        for cmd in commands:
            self.apply(
                lambda s, c=cmd: workflow.command(s, c, session.counted(s), self.now()),  # type: ignore[misc]
                end=cmd.end,
            )
        if end > (commands[-1].end if commands else state.control_offset):
            # lines past the last command applied (applied before, or not commands): read once
            self.apply(scheduler.step_of, end=end)
        return bool(commands)

    # --- a worker's turn, its audit --------------------------------------------------------------

    def on_ended(self, ended: Ended) -> None:
        state = self.session.store.read()
        if state is None:
            return
        worker = scheduler.board_of(state).worker(ended.name)
        if worker is None:
            return
        if ended.role == "audit":
            self.on_audited(worker, ended)
            return
        now = self.now()
        backend = self.turns.backends[0]
        judged = self.turns.judge(
            backend,
            ended.tail,
            ended.exit_code,
            timed_out=ended.timed_out,
            start_error=ended.error,
            env=os.environ,
            echoed=self.prompts.pop(worker.name, ""),
        )
        text = judged.text or ""
        facts = judged.turn()
        where = Path(worker.worktree) if worker.worktree else self.ws.root  # journaled for the person
        refused = self.turns.refused(ended.tail, None, backend.choice.adapter, where, worker=worker.name)
        if refused:
            self.refusals[worker.name] = refused
        self.outputs[worker.name] = text
        asked = judged.question
        self.turns.spent(worker.name, backend, judged, judged.usage)
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
        after = step.board.worker(worker.name) if step is not None else None
        if step is None or after is None or after.status != scheduler.AUDITING:
            return
        if not self.start_audit(after, text, tuple(touched)):  # named by the board, not this run
            self.on_approved(after.name, True, "")

    def what_changed(self, worker: Worker) -> tuple[bool, list[str], str]:
        """Did the turn change anything, which files has the task changed, and what the worker
        must hear if its work cannot be taken: its commit on the task's branch (worktrees), or
        its files' mark (locks)."""
        if self.merges.isolation == WORKTREE:
            return self.merges.what_changed(worker)
        before = self.marks.pop(worker.name, None)
        after = files_mark(self.ws.root, worker.files)
        return before is None or after != before, list(worker.files), ""

    def on_audited(self, worker: Worker, ended: Ended) -> None:
        out = redact_output(agent.final_text(ended.tail).strip())
        approved = ended.exit_code == 0
        self.on_approved(
            worker.name, approved, f"AUDIT REJECTED YOUR WORK (exit {ended.exit_code}):\n{out[-3000:]}"
        )

    def on_approved(self, name: str, approved: bool, feedback: str) -> None:
        """The audit's word (or the engine's approval with no audit). Outside git an approved
        task is checked by the verification commands and completed here; with worktrees it
        joins the merge queue."""
        checked = None
        if approved and self.pulls is not None and self.open_pull(name):
            return
        if approved and self.merges.isolation == LOCKS:
            failure = self.merges.verify_tree()
            checked = self.verification.validation
            if failure is not None:
                approved, feedback = False, f"VERIFICATION FAILED AFTER YOUR WORK:\n{failure}"
            elif self.options.commit:
                state = self.session.store.read()
                worker = scheduler.board_of(state).worker(name) if state else None
                if worker is not None:
                    message = f"loopdeck: task {worker.task} ({worker.name})"
                    self.commits.files(worker.files, message, {"task": worker.task, "worker": worker.name})
        self.outputs.pop(name, None)
        self.apply(lambda s: workflow.audited(s, name, approved, feedback, self.now(), checked))

    def open_pull(self, name: str) -> bool:
        """With `--pr`: the approved turn's branch pushed and its pull request opened; the
        worker then waits for the host's word (`Pulls.poll`). False when it has no branch."""
        state = self.session.store.read()
        worker = scheduler.board_of(state).worker(name) if state is not None else None
        if worker is None or worker.branch is None or self.pulls is None:
            return False
        try:
            self.pulls.submit(worker, self.task(worker), self.outputs.pop(name, ""))
        except LoopdeckError as exc:
            why = f"task {worker.task}: its pull request could not be opened: {exc}"
            self.apply(lambda s: workflow.merge_ended(s, name, sha=None, problem=why, now=self.now()))
        return True

    def on_signal(self) -> int:
        signals = self.signals
        self.settle_ended(merge=False)
        self.apply(
            lambda s: workflow.interrupt(s, signals.pauses, f"{signals.name} to the runner", self.now())
        )
        self.pool.stop_all()
        self.report.finish("interrupted" if signals.pauses else "stopped", f"{signals.name} received")
        return signals.exit_code()


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

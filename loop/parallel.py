"""Driver 3: `loopdeck run --workers N`, parallel workers over a task graph.

The runner's sibling for graphs: it claims the loop as `loopdeck run` does, then keeps up to N
workers busy. It gathers facts (the graph, the workers' exits and output, audits, progress
marks, the control queue) and carries out what `loop.scheduler` decides: the graph's owner and
status fields, the processes to start and end, and the state, written by `loop.writer`.

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

from loop import agent, control, graph, scheduler, signals, verify, writer
from loop.errors import LoopdeckError
from loop.journal import Event, Journal
from loop.model import Effects, LoopState, Result
from loop.paths import Workspace
from loop.runner import EXIT_SIGINT, EXIT_SIGTERM, Options, Runner
from loop.scheduler import Step, Task, TurnEnd, Worker
from loop.state import StateStore
from loop.timeutil import utcnow
from loop.workers import Ended, Pool, files_mark

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
        """Worker → the progress mark of its files when its current turn started."""

    # --- carrying out a step -------------------------------------------------------------------

    def apply(self, decide: Callable[[LoopState], Step], end: int | None = None) -> Step | None:
        """Decide on the state as it is under the loop lock, and carry the decision out: the
        graph first (owner and status set before a worker starts), then the state and journal,
        then the processes."""
        with self.store.locked():
            state = self.store.read()
            if state is None:
                return None
            step = decide(state)
            new = step.seal()
            result = Result(
                "allow",
                new,
                events=list(step.events),
                effects=Effects(archive=step.archive),
                offset=end,
            )
            try:
                graph.write(self.parallel.graph, step.updates)
            except (OSError, LoopdeckError) as exc:
                result.events.append(("warning", {"message": f"the task graph was not updated: {exc}"}))
            writer.carry_out(self.ws, self.store, self.journal, state, result, self.now(), echo=self.echo)
        for name in step.end:
            self.pool.stop(name)
        for worker in step.start:
            self.launch(worker)
        return step

    def echo(self, event: Event) -> None:
        self.base.echo(event)

    # --- processes ---------------------------------------------------------------------------

    def task(self, worker: Worker) -> Task:
        """The worker's task as the graph was last read (read again if it is new)."""
        if worker.task not in self.tasks:
            self.read_graph()
        return self.tasks.get(worker.task) or Task(worker.task, worker.task, target_files=worker.files)

    def launch(self, worker: Worker) -> None:
        task = self.task(worker)
        prompt = scheduler.worker_prompt(self.goal, task, worker)
        log = self.ws.private_dir / "workers" / f"{worker.name}.{worker.turns:02d}.log"
        self.base.tally.iterations += 1
        try:
            argv, uses_stdin = agent.argv_for(self.options.agent, prompt, log.with_suffix(".prompt.md"))
        except ValueError as exc:
            self.pool.failed.append(
                Ended(worker.name, "worker", None, 0.0, str(exc).encode(), error=str(exc))
            )
            return
        env = {**os.environ, **worker_env(worker)}
        list_id = graph.list_id(self.parallel.graph)
        if list_id:
            env["CLAUDE_CODE_TASK_LIST_ID"] = list_id
        self.marks[worker.name] = files_mark(self.ws.root, worker.files)
        self.pool.start(worker.name, "worker", argv, prompt if uses_stdin else None, self.ws.root, log, env)

    def start_audit(self, worker: Worker, output: str) -> bool:
        """Start the audit of `worker`'s turn; False when there is no audit (exit 0 approves)."""
        log = self.ws.private_dir / "workers" / f"{worker.name}.{worker.turns:02d}.audit.log"
        if self.audit_check is not None:
            check = self.audit_check
            argv = list(check.argv) if check.argv is not None else ["sh", "-c", check.command]
            env = {**os.environ, **worker_env(worker)}
            self.pool.start(worker.name, "audit", argv, None, self.ws.root, log, env)
            return True
        if self.parallel.audit_agent:
            prompt = audit_prompt(self.task(worker), worker, output)
            argv, uses_stdin = agent.argv_for(
                self.parallel.audit_agent, prompt, log.with_suffix(".prompt.md")
            )
            env = {**os.environ, **worker_env(worker)}
            self.pool.start(
                worker.name, "audit", argv, prompt if uses_stdin else None, self.ws.root, log, env
            )
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
        self.apply(self.configure)
        self.base.reconfirm(self.store.read() or prepared, set(self.parallel.given))
        stamp = ""
        last_cycle = 0.0
        outputs: dict[str, str] = {}
        while True:
            if self.signal is not None:
                return self.on_signal()
            changed = self.apply_commands()
            current = self.store.read()
            if current is None:
                return self.base.finish("completed", "completed", archived=True)
            state = current
            if state.status == "stopped":
                self.pool.stop_all()
                return self.base.finish("stopped", "stopped by user")
            if state.status == "paused" and self.options.headless and state.waiting_kind == "escalation":
                self.apply(lambda s: scheduler.release(Step(s.copy(), scheduler.board_of(s))))
                return self.base.finish("escalated", f"{state.waiting_reason}: needs a person")
            for ended in self.pool.poll(self.options.iteration_timeout):
                changed = True
                self.on_ended(ended, outputs)
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
                if self.options.headless and step is not None and self.only_questions(step):
                    question = next(w.question for w in step.board.workers if w.status == "question")
                    self.apply(lambda s: scheduler.release(Step(s.copy(), scheduler.board_of(s))))
                    return self.base.finish("question", f"a worker asks: {question}")
                continue
            time.sleep(self.options.poll)

    def apply_cycle(self) -> Step | None:
        """One scheduling pass on the graph as it is now."""
        tasks = self.read_graph()
        return self.apply(lambda s: scheduler.cycle(s, tasks, self.now()))

    def only_questions(self, step: Step) -> bool:
        """Nothing runs, nothing could start, and a worker waits for an answer: with nobody
        watching (headless) the run ends and says what is asked."""
        workers = step.board.workers
        return (
            not step.start
            and not self.pool.running()
            and any(w.status == "question" for w in workers)
            and all(w.status in ("question", "stalled") for w in workers)
        )

    def configure(self, state: LoopState) -> Step:
        """This run's graph, capacity and audit into the board; workers a previous runner left
        (their processes died with it) give their tasks back to the graph."""
        step = scheduler.release(Step(state.copy(), scheduler.board_of(state)))
        audit = self.parallel.audit or self.parallel.audit_agent
        step.board = replace(
            step.board,
            graph=str(self.parallel.graph),
            capacity=self.parallel.workers,
            audit=audit,
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
        state = self.store.read()
        if state is None:
            return False
        commands, _bad, _end = control.read_since(self.ws.control, state.control_offset)
        for cmd in commands:
            self.apply(lambda s, c=cmd: scheduler.command(s, c, self.now()), end=cmd.end)  # type: ignore[misc]
        return bool(commands)

    def on_ended(self, ended: Ended, outputs: dict[str, str]) -> None:
        state = self.store.read()
        if state is None:
            return
        worker = scheduler.board_of(state).worker(ended.name)
        if worker is None:
            return
        text = agent.final_text(ended.tail)
        if ended.role == "worker":
            if ended.timed_out:
                text += f"\n(timed out after {self.options.iteration_timeout:g} s)"
            outputs[worker.name] = text
            if ended.exit_code == 0 and not signals.question(text) and self.start_audit(worker, text):
                # A turn that ended is a worker heard from, audited or not: while its audit runs,
                # a task waiting for a lock is waiting, not spinning.
                self.apply_if(scheduler.output_seen)
                return
            approved = ended.exit_code == 0
            feedback = "" if approved else verify.redact(text.strip()[-2000:] or f"exit {ended.exit_code}")
        else:
            text = outputs.pop(worker.name, "")
            audit_out = verify.redact(agent.final_text(ended.tail).strip())
            approved = ended.exit_code == 0
            feedback = f"AUDIT REJECTED YOUR WORK (exit {ended.exit_code}):\n{audit_out[-3000:]}"
        end = TurnEnd(
            worker.name,
            ended.exit_code if ended.role == "worker" else 0,
            text,
            approved,
            feedback,
            files_mark(self.ws.root, worker.files),
            ended.duration_s,
            self.marks.pop(worker.name, None),
        )
        if approved and self.options.commit and not signals.question(text):
            self.commit(worker)  # before the completion is written: the archive follows the commit
        tasks = self.read_graph()
        self.apply(lambda s: scheduler.turn_ended(s, tasks, end, self.now()))

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
        self.apply(lambda s: scheduler.interrupt(s, paused, f"{name} to the runner", self.now()))
        self.pool.stop_all()
        self.base.finish("interrupted" if paused else "stopped", f"{name} received")
        return EXIT_SIGINT if paused else EXIT_SIGTERM


def worker_env(worker: Worker) -> dict[str, str]:
    """What a worker and its audit find in their environment: who, which task, which files
    (one a line), so an audit command can check that task's files only."""
    return {WORKER_ENV: worker.name, "LOOPDECK_TASK": worker.task, "LOOPDECK_FILES": "\n".join(worker.files)}


def audit_prompt(task: Task, worker: Worker, output: str) -> str:
    files = "\n".join(f"- {f}" for f in task.target_files) or "- (no files named)"
    return (
        f"Audit the work of {worker.name} on task {task.id}: {task.subject}\n\n"
        f"{task.description.strip() or '(no description)'}\n\nFiles:\n{files}\n\n"
        f"The worker's report:\n{output.strip()[-4000:]}\n\n"
        "Exit 0 to approve. Otherwise explain what is wrong: your output goes back to the worker."
    )


def commit_files(root: Path, files: tuple[str, ...], message: str) -> str | None:
    """Commit the given files only (a worker's own), leaving every other change alone; the
    new sha, or None when they did not change."""
    files = tuple(f for f in files if (root / f).exists() or _tracked(root, f))
    if not files:
        return None
    git = ["git", "-c", "core.hooksPath=/dev/null"]
    subprocess.run([*git, "add", "-A", "--", *files], cwd=root, check=True, capture_output=True)
    staged = subprocess.run(
        [*git, "diff", "--cached", "--quiet", "--", *files], cwd=root, capture_output=True
    )
    if staged.returncode == 0:
        return None
    subprocess.run(
        [*git, "commit", "-q", "--no-verify", "-m", message, "--only", "--", *files],
        cwd=root,
        check=True,
        capture_output=True,
    )
    head = subprocess.run([*git, "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True, text=True)
    return head.stdout.strip() or None


def _tracked(root: Path, name: str) -> bool:
    found = subprocess.run(["git", "ls-files", "--error-unmatch", "--", name], cwd=root, capture_output=True)
    return found.returncode == 0

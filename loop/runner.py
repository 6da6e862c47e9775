"""Driver 2: the external loop (`loopdeck run`), a fresh agent process per iteration.

Each iteration is what a Stop is to the hook: the engine decides (block = run the agent again
with this prompt; allow = the loop is paused, stopped or finished), so both drivers keep the
same rules. Around the engine the runner adds what only a long-lived process can do (seed 003
§4.4.2/5/6, seed 004): verification commands after each turn, retries with backoff, timeouts that
kill the agent's whole process group, stuck detection, commits, signals, and a summary for every
way a loop ends.

Commands are read from the control queue while the agent works: `skip` and `complete` end the
agent at once; `pause` and `stop` let the iteration finish.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loop import agent, control, engine, verify
from loop.apply import commit_decision
from loop.archive import archive
from loop.errors import LoopdeckError
from loop.journal import Event, Journal, render_line
from loop.paths import Workspace
from loop.signals import question
from loop.sources.aggregate import Aggregate, SourceConfig, check_all
from loop.state import LoopState, StateStore
from loop.summary import Tally, progress_line, summary_lines
from loop.timeutil import utcnow

EXIT_DONE, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 130, 143
SAME_TASK_FAILURES = 3
SAME_ERROR_TIMES = 3
NO_PROGRESS_ITERATIONS = 2


@dataclass
class Options:
    agent: str = agent.DEFAULT_AGENT
    iteration_timeout: float | None = 1800.0
    retries: int = 2
    backoff: tuple[float, ...] = (1.0, 5.0, 15.0)
    commit: bool = False
    headless: bool = True
    """Headless: an escalation ends the run with a summary (nobody is there to answer)."""
    verify_timeout: float = 600.0
    poll: float = 0.2

    def record(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "iteration_timeout": self.iteration_timeout,
            "retries": self.retries,
            "commit": self.commit,
        }


class Runner:
    def __init__(
        self,
        ws: Workspace,
        options: Options,
        out: Callable[[str], None] | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.ws = ws
        self.options = options
        self.store = StateStore(ws, lock_timeout=30)
        self.journal = Journal(ws.journal)
        self.out = out or (lambda line: print(line, flush=True))
        self.now = now
        self.signal: int | None = None
        self.tally = Tally()
        self.offset = 0
        self.checks: list[verify.Check] = []
        self.task_failures: dict[str, int] = {}
        self.errors: list[str] = []
        self.no_progress = 0
        self.last_mode = "work"
        self.waiting_for: str | None = None
        """A question or escalation the loop is paused on: it waits for a person, not a restart."""

    # --- the journal, echoed as log lines ----------------------------------------------------

    def event(self, kind: str, iteration: int | None, data: dict[str, Any] | None = None) -> None:
        self.echo(self.journal.append(kind, iteration, data))

    def echo(self, event: Event) -> None:
        if event.kind in ("command-applied",):
            return
        self.out(render_line(event))

    # --- setup ---------------------------------------------------------------------------------

    def prepare(self, create: Callable[[], LoopState] | None) -> LoopState:
        """Load or create the state, check the verification commands, claim the loop."""
        with self.store.locked():
            state = self.store.read()
            if state is None:
                if create is None:
                    raise LoopdeckError(f"no loop in {self.ws.root}: give a PROMPT to start one")
                state = create()
                fresh = True
            else:
                fresh = False
                if state.status in ("stopped", "failed"):
                    state.status = "running"  # `loopdeck run` on a stopped loop continues it
            allow = state.extra.get("verify_allow") or []
            if not isinstance(allow, list):
                raise LoopdeckError(f"{self.ws.state}: verify_allow must be a list of commands")
            self.checks = [verify.check(cmd, [str(a) for a in allow]) for cmd in state.verify]
            if state.driver == "runner" and state.pid and state.pid != os.getpid():
                from loop.proc import alive

                if alive(state.pid):
                    raise LoopdeckError(
                        f"a runner (pid {state.pid}) is already driving the loop in {self.ws.root}"
                    )
            self.waiting_for = self.open_prompt() if state.status == "paused" else None
            if state.status in ("paused", "stopping", "initializing") and self.waiting_for is None:
                state.status = "running"
            state.driver = "runner"
            state.pid = os.getpid()
            state.extra["runner"] = self.options.record()
            self.store.write(state, replace_corrupt=False)
            self.offset = state.control_offset
        if fresh:
            self.event("loop-started", 0, {"max_iterations": state.max_iterations, "driver": "runner"})
        self.event("runner-started", state.iteration, {"pid": os.getpid(), "agent": self.options.agent})
        return state

    # --- the decision --------------------------------------------------------------------------

    def decide(self, last_text: str | None, failure: str | None = None) -> engine.Result:
        with self.store.locked():
            state = self.store.read()
            if state is None:
                return engine.Result("allow", None)
            commands, bad, end = control.read_since(self.ws.control, state.control_offset)
            stop = engine.StopInput(
                last_text=last_text,
                driver="runner",
                verification_failure=failure,
                ralph_active=self.ws.ralph_state.exists(),
            )
            now = self.now()
            result = engine.decide(state, stop, commands, lambda: self.count(state), now)
            if result.state is not None:
                result.state.pid = os.getpid()
            commit_decision(self.ws, self.store, self.journal, state, result, end, bad, now, self.echo)
            self.offset = end
        for kind, data in result.events:
            if kind == "blocked":
                self.last_mode = str(data.get("mode", "work"))
        return result

    def count(self, state: LoopState) -> Aggregate:
        return check_all(SourceConfig.from_state(self.ws, state))

    def pending_interrupt(self) -> str | None:
        """Why the running agent must end now: a signal, or a skip/complete in the queue."""
        if self.signal is not None:
            return f"signal {signal.Signals(self.signal).name}"
        commands, _bad, _end = control.read_since(self.ws.control, self.offset)
        for command in commands:
            if command.kind in ("skip", "complete"):
                return command.kind
        return None

    # --- one iteration -------------------------------------------------------------------------

    def iterate(self, state: LoopState, prompt: str) -> tuple[str | None, str | None]:
        """Run the agent (with retries) and the verification commands.

        Returns the agent's final text and the verification failure, if any.
        """
        n = state.iteration
        self.tally.iterations += 1
        self.event(
            "iteration-started", n, {"max_iterations": state.max_iterations, "task": state.current_task}
        )
        before = self.progress_mark(state)
        logs = self.ws.private_dir / "iterations"
        text: str | None = None
        attempts = 1 + max(0, self.options.retries)
        run: agent.Run | None = None
        for attempt in range(1, attempts + 1):
            log = logs / (f"{n:04d}.log" if attempt == 1 else f"{n:04d}.retry{attempt - 1}.log")
            run = agent.run(
                self.options.agent,
                prompt,
                self.ws.root,
                log,
                self.options.iteration_timeout,
                self.pending_interrupt,
                poll=self.options.poll,
            )
            if run.ok or run.interrupted:
                break
            why = run.error or (
                f"timed out after {self.options.iteration_timeout:g} s"
                if run.timed_out
                else f"exit {run.exit_code}: {agent.final_text(run.tail).strip().splitlines()[-1:] or ''}"
            )
            self.tally.agent_failures.append(f"iteration {n}: {why}")
            self.event(
                "agent-failed",
                n,
                {"attempt": attempt, "of": attempts, "reason": verify.redact(str(why)), "log": str(log)},
            )
            if run.error or attempt == attempts:
                break
            delay = self.options.backoff[min(attempt - 1, len(self.options.backoff) - 1)]
            self.event("retry", n, {"in_s": delay, "attempt": attempt + 1})
            if self.sleep(delay):
                break
        assert run is not None
        if run.interrupted:
            self.event("agent-interrupted", n, {"reason": run.interrupted})
            return None, None
        if not run.ok:
            self.note_failure(state, "agent failed")
            return None, None
        text = agent.final_text(run.tail)
        failure = self.run_checks(n) if self.checks else None
        if failure is None and self.options.commit:
            self.commit(n)
        self.check_progress(state, before)
        duration = round(time.monotonic() - self.tally.started, 1)
        self.event("iteration-completed", n, {"duration_s": run.duration_s, "elapsed_s": duration})
        return text, failure

    def run_checks(self, n: int) -> str | None:
        failures = []
        for item in self.checks:
            self.event("verification-started", n, {"command": item.command})
            outcome = verify.run(item, self.ws.root, self.options.verify_timeout)
            data = {
                "command": item.command,
                "exit_code": outcome.exit_code,
                "duration_s": outcome.duration_s,
                "tail": outcome.tail,
            }
            if outcome.passed:
                self.event("verification-passed", n, data)
            else:
                self.event("verification-failed", n, data)
                failures.append(f"$ {item.command}\n(exit {outcome.exit_code})\n{outcome.tail}")
        if not failures:
            return None
        self.tally.verify_failures += 1
        feedback = "\n\n".join(failures)
        self.note_error(n, feedback)
        return feedback

    def commit(self, n: int) -> None:
        from loop import gitstate

        try:
            sha = gitstate.commit(self.ws.root, f"loopdeck: iteration {n}")
        except Exception as exc:  # a repo problem must not lose the run: say it and go on
            self.event("warning", n, {"message": f"commit failed: {exc}"})
            return
        if sha:
            self.tally.commits.append(sha)
            self.event("commit", n, {"sha": sha})

    # --- stuck detection ----------------------------------------------------------------------

    def progress_mark(self, state: LoopState) -> tuple[str | None, str]:
        from loop import gitstate

        counts = self.count(state)
        tasks = repr([(r.name, r.pending, r.in_progress, r.done) for r in counts.sources])
        return gitstate.fingerprint(self.ws.root), tasks

    def check_progress(self, state: LoopState, before: tuple[str | None, str]) -> None:
        if self.last_mode != "work":
            self.no_progress = 0
            return
        after = self.progress_mark(state)
        self.no_progress = self.no_progress + 1 if after == before else 0
        if self.no_progress >= NO_PROGRESS_ITERATIONS:
            self.escalate(
                "stuck", f"no progress in {self.no_progress} iterations (no git change, no task change)"
            )

    def note_failure(self, state: LoopState, why: str) -> None:
        task = state.current_task or "(no task)"
        self.task_failures[task] = self.task_failures.get(task, 0) + 1
        self.note_error(state.iteration, self.tally.agent_failures[-1] if self.tally.agent_failures else why)
        if self.task_failures[task] >= SAME_TASK_FAILURES:
            self.escalate("repeated-failures", f"task {task!r} failed {self.task_failures[task]} times")

    def note_error(self, n: int, error: str) -> None:
        signature = error.split("(timed out")[0][-400:]
        self.errors.append(signature)
        recent = self.errors[-SAME_ERROR_TIMES:]
        if len(recent) == SAME_ERROR_TIMES and len(set(recent)) == 1:
            self.escalate("stuck", f"the same error {SAME_ERROR_TIMES} times in a row")

    def pause_for(self, reason: str) -> None:
        with self.store.locked():
            state = self.store.read()
            if state is None or not state.active:
                return
            state.status = "paused"
            self.store.write(state)
        self.event("paused", state.iteration, {"reason": reason})

    def escalate(self, kind: str, reason: str) -> None:
        """Pause the loop and say why: a person decides what happens next."""
        state = self.store.read()
        self.event("escalation", state.iteration if state else None, {"kind": kind, "reason": reason})
        self.pause_for(f"escalation: {reason}")
        self.errors.clear()
        self.no_progress = 0

    # --- waiting ---------------------------------------------------------------------------------

    def sleep(self, seconds: float) -> bool:
        """Sleep, waking early (True) for a signal or a skip/complete command."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.pending_interrupt():
                return True
            time.sleep(min(self.options.poll, max(0.0, deadline - time.monotonic())))
        return False

    def wait_while_paused(self) -> bool:
        """Block until a command arrives; False when a signal came instead."""
        while self.signal is None:
            commands, _bad, _end = control.read_since(self.ws.control, self.offset)
            if commands:
                return True
            time.sleep(self.options.poll)
        return False

    # --- the loop ----------------------------------------------------------------------------

    def run(self, create: Callable[[], LoopState] | None = None) -> int:
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run(create)
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signal = signum

    def _run(self, create: Callable[[], LoopState] | None) -> int:
        state = self.prepare(create)
        if self.waiting_for is not None and self.options.headless:
            pending = control.read_since(self.ws.control, self.offset)[0]
            if not pending:
                return self.finish("escalated", f"still waiting for a person: {self.waiting_for}")
        result = self.decide(None)
        while True:
            if self.signal is not None:
                return self.on_signal()
            new = result.state
            if result.blocked and new is not None:
                escalated = self.escalated_now(result)
                if escalated is not None:
                    self.pause_for(f"escalation: {escalated}")
                    if self.options.headless:
                        how = "limit" if "iterations reached" in escalated else "escalated"
                        return self.finish(how, f"{escalated}: needs a person")
                    result = engine.Result("allow", None)
                    continue
                state = new
                text, failure = self.iterate(state, result.reason or state.prompt)
                self.progress(state)
                if self.signal is not None:
                    return self.on_signal()
                asked = question(text)
                if asked is not None:
                    self.event("question", state.iteration, {"question": asked})
                    self.pause_for("the agent asked a question")
                    if self.options.headless:
                        return self.finish("question", f"the agent asks: {asked}")
                current = self.store.read()
                if (
                    current is not None
                    and current.status == "paused"
                    and self.options.headless
                    and self.last_escalation()
                ):
                    return self.finish("escalated", self.last_escalation() or "escalated")
                result = self.decide(text, failure)
                continue
            current = self.store.read()
            if current is None:  # archived: completed, or forced
                return self.finish("completed", self.archive_reason() or "completed", archived=True)
            if current.status == "stopped":
                return self.finish("stopped", "stopped by user")
            if current.status == "paused":
                if not self.wait_while_paused():
                    return self.on_signal()
                result = self.decide(None)
                continue
            return self.finish("failed", f"unexpected status {current.status}")

    def escalated_now(self, result: engine.Result) -> str | None:
        """The reason of an escalation this decision raised, if any."""
        for kind, data in result.events:
            if kind == "escalation":
                return str(data.get("reason", "escalated"))
        return None

    def open_prompt(self) -> str | None:
        """The question or escalation the journal shows unanswered, if any."""
        for event in reversed(self.journal.tail(100).events):
            if event.kind in ("resumed", "answered"):
                return None
            if event.kind == "question":
                return f"the agent asks: {event.data.get('question', '')}"
            if event.kind == "escalation":
                return str(event.data.get("reason", "escalated"))
        return None

    def last_escalation(self) -> str | None:
        events = self.journal.tail(20, where=lambda e: e.kind in ("escalation", "resumed")).events
        if events and events[-1].kind == "escalation":
            return str(events[-1].data.get("reason", "escalated"))
        return None

    def archive_reason(self) -> str | None:
        events = self.journal.tail(20, where=lambda e: e.kind == "completed").events
        return str(events[-1].data.get("reason")) if events else None

    def on_signal(self) -> int:
        signum = self.signal or signal.SIGTERM
        paused = signum == signal.SIGINT
        with self.store.locked():
            state = self.store.read()
            if state is not None and state.active:
                state.status = "paused" if paused else "stopped"
                self.store.write(state)
        name = signal.Signals(signum).name
        self.event(
            "paused" if paused else "stopped",
            state.iteration if state else None,
            {"reason": f"{name} to the runner"},
        )
        self.finish("interrupted" if paused else "stopped", f"{name} received")
        return EXIT_SIGINT if paused else EXIT_SIGTERM

    # --- output --------------------------------------------------------------------------------

    def progress(self, state: LoopState) -> None:
        try:
            counts = self.count(state)
        except Exception:  # progress is a courtesy
            return
        done = sum(r.done for r in counts.sources if r.available)
        total = done + counts.pending_total
        if total:
            self.out(progress_line(done, total))

    def finish(self, how: str, reason: str, archived: bool = False) -> int:
        """Print and archive the summary (seed 003 §4.4.6); the exit status for `how`."""
        state = self.store.read() if not archived else None
        counts: Aggregate | None = None
        with contextlib.suppress(Exception):
            counts = self.count(state) if state is not None else None
        folder = None
        if archived:
            from loop.archive import latest

            folder = latest(self.ws)
        elif state is not None:
            state = dataclasses.replace(state)
            folder = archive(self.ws, state, how, self.summary_data(how, reason, counts))
        for line in summary_lines(how, reason, self.tally, counts, folder, state):
            self.out(line)
        if how in ("completed", "stopped"):
            return EXIT_DONE
        return EXIT_FAILED

    def summary_data(self, how: str, reason: str, counts: Aggregate | None) -> dict[str, Any]:
        return {
            "outcome": how,
            "reason": reason,
            "iterations_this_run": self.tally.iterations,
            "agent_failures": self.tally.agent_failures,
            "verification_failures": self.tally.verify_failures,
            "commits": self.tally.commits,
            "pending_at_end": counts.pending_total if counts else None,
            "duration_s": round(time.monotonic() - self.tally.started, 1),
        }


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `loopdeck run`")

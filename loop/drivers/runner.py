"""Driver 2: the external loop (`loopdeck run`), a fresh agent process per iteration.

Each iteration is what a Stop is to the hook: the engine decides (block = run the agent again
with this prompt; allow = the loop is paused, stopped or finished), so both drivers keep the
same rules. The runner itself only manages processes and gathers facts: it starts the agent
(with retries and backoff), times it out and kills its whole process group, runs the
verification commands, commits, and takes the workspace's progress fingerprint; what those facts
mean (stuck, failing, asking, escalating, waiting) is the engine's to say, and `loop.drivers.writer`
writes it down.

The runner is built from parts the parallel driver shares: the loop's files (`session`), the
claim and what a person confirmed (`claim`), the agent's turn (`turn`), the checks
(`verification`), the commits (`commits`), the progress mark (`marks`) and what the person
reads (`report`). What is the runner's own is here: one turn at a time, its retries, and the
waits between turns.

Commands are read from the control queue while the agent works: `skip` and `complete` end the
agent at once; `pause` and `stop` let the iteration finish.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from loop import agents
from loop.agents.turn import Judgement, error_signature
from loop.core import engine
from loop.core.model import LoopState, Result, Settings, StopInput, Turn, replace
from loop.core.redact import redact
from loop.core.timeutil import parse_iso, utcnow
from loop.drivers import writer
from loop.drivers.children import EXIT_SIGINT, EXIT_SIGTERM, Children, Signals
from loop.drivers.claim import ENDS_A_TURN, Claim, cut_short
from loop.drivers.commits import Commits
from loop.drivers.marks import Marks, StartedMark
from loop.drivers.report import LOOP_COMMITS, Report, stage_of
from loop.drivers.session import ANSWER_HINT, CorruptState, Options, Session
from loop.drivers.turn import Backend, Turns, added, spent_data
from loop.drivers.verification import Verification
from loop.processes import agent
from loop.store import control
from loop.store.paths import Workspace
from loop.store.state import StateError
from loop.trust import key as trust_key

__all__ = [
    "ANSWER_HINT",
    "ENDS_A_TURN",
    "EXIT_SIGINT",
    "EXIT_SIGTERM",
    "LOOP_COMMITS",
    "Backend",
    "CorruptState",
    "Options",
    "Runner",
    "StartedMark",
    "cut_short",
    "spent_data",
    "stage_of",
]

Iterated = tuple[Turn, str | None, str | None, bool]
"""A turn as the decision reads it: the facts, the agent's final text, the checks' failure,
and whether the checks ran and passed."""


@dataclass
class Attempts:
    """What the agent's attempts at one turn came to (retries included)."""

    backend: Backend
    run: agent.Run | None = None
    judged: Judgement | None = None
    usage: dict[str, int] | None = None
    limited: Turn | None = None
    """A usage limit held every agent: the turn the engine waits on."""


class Runner:
    def __init__(
        self,
        ws: Workspace,
        options: Options,
        out: Callable[[str], None] | None = None,
        now: Callable[[], datetime] = utcnow,
        settings: Settings | None = None,
    ) -> None:
        self.ws = ws
        self.options = options
        self.settings = settings or Settings()
        """Options given on this `run`'s command line for an existing loop (the engine applies them)."""
        self.session = Session(ws, options, out, now)
        self.out = self.session.out
        self.now = now
        self.policy = engine.RUNNER.watched(options.headless)
        """How this run stands to the loop, as the engine reads it (watched, or headless)."""
        self.signals = Signals()
        self.children = Children()
        """Kills the agent's process tree when this runner dies, however it dies."""
        self.turns = Turns(self.session)
        self.claim = Claim(self.session, self.settings, self.policy)
        self.verification = Verification(self.session, self.settings, self.turns, self.children, self.signals)
        self.commits = Commits(self.session)
        self.marks = Marks(ws.root)
        self.report = Report(self.session, self.claim)
        self.offset = 0
        """The state's control queue offset as last written: commands past it are pending."""
        self.validation: dict[str, Any] | None = None
        """The checks' results of the turn that just ended, with `git_clean` (None: none ran)."""

    # --- the decision --------------------------------------------------------------------------

    def decide(
        self,
        last_text: str | None,
        failure: str | None = None,
        verified: bool = False,
        turn: Turn | None = None,
        validation: dict[str, Any] | None = None,
    ) -> Result:
        """Ask the engine what the turn that just ended means, and write its answer down. A state
        file found corrupt is recovered first (`Session.recover`), and the turn decided on what it holds."""
        try:
            return self._decide(last_text, failure, verified, turn, validation)
        except StateError as exc:
            self.session.recover(exc)  # CorruptState when it cannot be
            return self._decide(last_text, failure, verified, turn, validation)

    def _decide(
        self,
        last_text: str | None,
        failure: str | None,
        verified: bool,
        turn: Turn | None,
        validation: dict[str, Any] | None = None,
    ) -> Result:
        session, ws = self.session, self.ws
        with session.store.locked():
            state = session.store.read()
            if state is None:
                return Result("allow", None)
            commands, bad, end = control.read_unapplied(
                ws, state.control_offset, session.journal, trust_key.reader(ws.root)
            )
            stop = StopInput(
                last_text=last_text,
                driver=self.policy.name,
                verification_failure=failure,
                verified=verified,
                ralph_active=ws.ralph_state.exists(),
                turn=turn,
                unconfirmed=self.claim.unconfirmed(state),
                validation=validation,
            )
            if "design" in state.extra:  # locked while the loop runs: one read and hash a turn
                from loop.design import lock

                stop = replace(stop, design_changed=lock.changed(ws.root, state))
            now = self.now()
            needed = engine.needs_sources(state, stop, commands, self.policy)
            sources = session.count(state) if needed else None
            if engine.needs_look(state, turn, commands, sources):  # read last: git ran meanwhile
                assert turn is not None
                stop = replace(stop, turn=replace(turn, changed=self.marks.changed()))
            result = engine.decide(state, stop, commands, sources, now, self.policy)
            if turn is not None:  # after a turn: the tasks done so far (counted once for both), what is next
                self.report.progress(state, sources, result if result.blocked else None)
            if result.state is not None:
                result.state.pid = os.getpid()
            writer.carry_out(ws, session.store, session.journal, state, result, now, end, bad, session.echo)
            self.offset = result.state.control_offset if result.state is not None else end
            if result.state is not None:
                session.final = result.state
        return result

    def baseline(self, state: LoopState) -> dict[str, Any] | None:
        """The checks once before a new loop's first turn: where the tests start (journaled as
        iteration 0), so the first turn's progress is judged too. None when there are no checks,
        or the loop has worked or been checked already."""
        if state.iteration or state.last_validation or not self.verification or state.waiting_for:
            return None
        self.verification.run(0, counted=False)
        found = self.verification.validation
        return {**found, "git_clean": self.marks.clean()} if found is not None else None

    def pending_interrupt(self) -> str | None:
        """Why the running agent must end now: a signal, or a skip/complete in the queue."""
        if self.signals.caught is not None:
            return f"signal {self.signals.name}"
        commands, _bad, _end = control.read_since(self.ws.control, self.offset)
        if any(command.kind in ("skip", "complete") for command in commands):
            # the journal is read only now, rarely: a command applied already ends nothing
            commands, _bad, _end = control.read_unapplied(
                self.ws, self.offset, self.session.journal, trust_key.reader(self.ws.root)
            )
        for command in commands:
            if command.kind in ("skip", "complete") and engine.refusal(command) is None:
                return command.kind
        return None

    # --- one iteration -------------------------------------------------------------------------

    def iterate(self, state: LoopState, prompt: str) -> Iterated:
        """Run the agent (with retries) and the verification commands.

        Returns what the runner saw (the Turn), the agent's final text, the verification
        failure if any, and whether verification ran and passed. A usage limit is no failure:
        with a fallback agent free, the turn goes to it at once; else the engine waits.
        """
        n = state.iteration
        self.validation = None
        self.session.tally.iterations += 1
        backend = self.turns.backend_for_turn(n)
        started = {"max_iterations": state.max_iterations, "task": state.current_task, "agent": backend.name}
        self.session.event("iteration-started", n, started)
        self.marks.begin()
        if self.session.tally.start_head is None:
            self.session.tally.start_head = self.marks.start_head
        tried = self.attempts(state, prompt, backend)
        if tried.limited is not None:
            return tried.limited, None, None, False
        run, judged = tried.run, tried.judged
        assert run is not None
        if run.interrupted or judged is None:
            self.session.event("agent-interrupted", n, {"reason": run.interrupted})
            return Turn(interrupted=run.interrupted), None, None, False
        refused = self.turns.refused(
            run.tail, n, tried.backend.choice.adapter, self.ws.root
        )  # a failed turn's too
        if not judged.ok:
            failures = self.session.tally.agent_failures
            failed = failures[-1] if failures else str(judged.failure)
            error = error_signature(str(judged.failure))  # without "iteration N: ": comparable
            return Turn(failure=failed, error=error, usage=tried.usage, refused=refused), None, None, False
        return self.completed(n, tried, refused)

    def attempts(self, state: LoopState, prompt: str, backend: Backend) -> Attempts:
        """The agent run until a turn comes back judged: a failure is retried after a backoff,
        a usage limit turns to a free fallback (no retry spent) or ends in `limited`."""
        n, options = state.iteration, self.options
        logs = self.ws.iteration_logs(state.started_at, state.loop_id)
        tries = 1 + max(0, options.retries)
        promise = state.completion_promise if state.completion_promise not in ("", "null") else None
        tried = Attempts(backend)
        attempt, runs = 1, 0
        while True:
            log = logs / (f"{n:04d}.log" if runs == 0 else f"{n:04d}.retry{runs}.log")
            runs += 1
            env = tried.backend.env()
            box = self.turns.sandbox_for(read_only=design_paths(self.ws.root, state))
            tried.run = run = agent.run(
                agents.in_sandbox(tried.backend.choice, box is not None),
                prompt,
                self.ws.root,
                log,
                options.iteration_timeout,
                self.pending_interrupt,
                poll=options.poll,
                env=self.children.env(env),
                register=self.children.register(),
                sandbox=box,
            )
            self.children.release()
            if run.interrupted:
                return tried
            tried.judged = judged = self.turns.judge(
                tried.backend,
                run.tail,
                run.exit_code,
                timed_out=run.timed_out,
                start_error=run.error,
                env=env,
                promise=promise,
                echoed=prompt,
            )
            tried.usage = added(tried.usage, judged.usage)  # a retried turn costs every attempt
            if judged.limited is not None:
                # Not a failure: no retry spent. Another agent if one is free, else the engine
                # makes the loop wait for the (earliest) reset.
                other = self.turns.on_limit(tried.backend, judged, n)
                if other is not None:
                    tried.backend = other
                    continue
                resets = self.turns.resets_at(judged)
                tried.limited = Turn(limited=judged.limited, resets_at=resets, usage=tried.usage)
                return tried
            tried.backend.waits = 0
            if judged.ok or not self.failed(n, judged, attempt, tries, log) or run.error:
                return tried
            if self.backoff(n, attempt):
                return tried
            attempt += 1

    def failed(self, n: int, judged: Judgement, attempt: int, tries: int, log: Path) -> bool:
        """Journal a failed attempt; whether another is left."""
        why = str(judged.failure)
        self.session.tally.agent_failures.append(f"iteration {n}: {why}")
        data = {"attempt": attempt, "of": tries, "reason": redact(why), "log": str(log)}
        self.session.event("agent-failed", n, data)
        return attempt < tries

    def backoff(self, n: int, attempt: int) -> bool:
        """Wait before the next attempt; True when a signal or a command cut the wait short."""
        delays = self.options.backoff
        delay = delays[min(attempt - 1, len(delays) - 1)]
        self.session.event("retry", n, {"in_s": delay, "attempt": attempt + 1})
        return self.sleep(delay)

    def completed(self, n: int, tried: Attempts, refused: str | None) -> Iterated:
        """A turn the agent finished: the checks, the commit, its look, its cost journaled."""
        assert tried.run is not None and tried.judged is not None
        judged = tried.judged
        failure = self.verification.run(n)
        unresolved: tuple[str, ...] = ()
        if failure is None and self.options.commit:
            unresolved = self.commits.turn(n)
        self.marks.ended()  # what the turn left, checks and commit included
        if self.verification.validation is not None:
            self.validation = {**self.verification.validation, "git_clean": self.marks.clean()}
        elapsed = round(time.monotonic() - self.session.tally.started, 1)
        spent = self.turns.spent(n, tried.backend, judged, tried.usage)
        data = {"duration_s": tried.run.duration_s, "elapsed_s": elapsed, **spent}
        self.session.event("iteration-completed", n, data)
        turn = Turn(
            error=error_signature(failure) if failure else None,
            usage=tried.usage,
            denied=judged.facts.denied,
            denied_hint=judged.facts.denied_hint,
            unresolved=unresolved,
            refused=refused,
            files=self.marks.files(),
        )
        return turn, judged.text, failure, bool(self.verification) and failure is None

    # --- waiting ---------------------------------------------------------------------------------

    def sleep(self, seconds: float) -> bool:
        """Sleep, waking early (True) for a signal or a skip/complete command."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.pending_interrupt():
                return True
            time.sleep(min(self.options.poll, max(0.0, deadline - time.monotonic())))
        return False

    def wait_for_reset(self, state: LoopState) -> bool:
        """Sleep until a usage limit resets, waking early for any command; False on a signal."""
        until = parse_iso(str((state.waiting_for or {}).get("until", "")))
        self.out(f"loopdeck: waiting for the usage limit to reset ({(state.waiting_for or {}).get('until')})")
        while self.signals.caught is None:
            if until is None or self.now() >= until or self.queued():
                return True
            time.sleep(min(self.options.poll * 5, max(0.05, (until - self.now()).total_seconds())))
        return False

    def wait_while_paused(self) -> bool:
        """Block until a command arrives; False when a signal came instead."""
        while self.signals.caught is None:
            if self.queued():
                return True
            time.sleep(self.options.poll)
        return False

    def queued(self) -> bool:
        return bool(control.read_since(self.ws.control, self.offset)[0])

    # --- the loop ----------------------------------------------------------------------------

    def run(self, create: Callable[[], LoopState] | None = None) -> int:
        with self.signals.noted(), self.children.supervised():
            try:
                return self._drive(create)
            except CorruptState as exc:
                return self.report.finish("escalated", str(exc))
            finally:
                self.marks.drop()

    def prepare(self, create: Callable[[], LoopState] | None) -> LoopState:
        """Load or create the state, check the verification commands, claim the loop."""
        boxed = self.turns.sandbox_line()  # `--sandbox on` without one: refused before anything is written
        state = self.claim.prepare(create, boxed, self.verification.admit)
        self.offset = state.control_offset
        return state

    def _drive(self, create: Callable[[], LoopState] | None) -> int:
        state = self.prepare(create)
        ending = engine.run_ends(self.policy, state, at_start=True)
        if ending is not None and not self.queued():
            return self.report.finish(*ending)
        result = self.decide(None, validation=self.baseline(state))
        while True:
            if self.signals.caught is not None:
                return self.on_signal()
            if result.blocked and result.state is not None:
                state = result.state
                turn, text, failure, verified = self.iterate(state, result.reason or state.prompt)
                if self.signals.caught is not None:
                    return self.on_signal()
                result = self.decide(text, failure, verified, turn, self.validation)
                continue
            if result.effects.archive is not None:
                return self.report.finish(
                    "completed", str(result.effects.archive.get("reason")), archived=True
                )
            current = result.state if result.state is not None else self.session.read_state()
            if current is None:  # archived by someone else (a forced completion seen elsewhere)
                return self.report.finish("completed", "completed", archived=True)
            self.marks.forget()
            waited = self.wait(current)
            if isinstance(waited, int):
                return waited
            result = waited

    def wait(self, current: LoopState) -> Result | int:
        """A loop no turn runs for: the next decision once what it waits for came, or the
        run's exit status."""
        if current.waiting_kind == "usage-limit" and current.status == "running":
            return self.decide(None) if self.wait_for_reset(current) else self.on_signal()
        if current.status == "stopped":
            return self.report.finish("stopped", "stopped by user")
        if current.status == "paused":
            ending = engine.run_ends(self.policy, current)
            if ending is not None:
                return self.report.finish(*ending)
            return self.decide(None) if self.wait_while_paused() else self.on_signal()
        return self.fail(f"the loop is {current.status}: the runner cannot drive it")

    def fail(self, reason: str) -> int:
        """The loop cannot go on: the engine ends it `failed` (with its summary), then ours."""
        session = self.session
        with session.store.locked():
            state = session.store.read()
            if state is not None:
                now = self.now()
                result = engine.fail(state, reason, now, session.counted(state))
                writer.carry_out(
                    self.ws, session.store, session.journal, state, result, now, echo=session.echo
                )
        return self.report.finish("failed", reason)

    def on_signal(self) -> int:
        session, signals = self.session, self.signals
        with session.store.locked():
            state = session.store.read()
            if state is not None:
                now = self.now()
                result = engine.interrupt(state, signals.pauses, f"{signals.name} to the runner", now)
                writer.carry_out(
                    self.ws, session.store, session.journal, state, result, now, echo=session.echo
                )
        self.report.finish("interrupted" if signals.pauses else "stopped", f"{signals.name} received")
        return signals.exit_code()


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `loopdeck run`")


def design_paths(root: Path, state: LoopState) -> tuple[Path, ...]:
    """The loop's design, which its sandboxed agent reads but never writes (most loops have
    none, and load nothing for it)."""
    if "design" not in state.extra:
        return ()
    from loop.design import lock

    return lock.paths(root, state)

"""Driver 2: the external loop (`loopdeck run`), a fresh agent process per iteration.

Each iteration is what a Stop is to the hook: the engine decides (block = run the agent again
with this prompt; allow = the loop is paused, stopped or finished), so both drivers keep the
same rules. The runner itself only manages processes and gathers facts: it starts the agent
(with retries and backoff), times it out and kills its whole process group, runs the
verification commands, commits, and takes the workspace's progress fingerprint; what those facts
mean (stuck, failing, asking, escalating, waiting) is the engine's to say, and `loop.drivers.writer`
writes it down.

Commands are read from the control queue while the agent works: `skip` and `complete` end the
agent at once; `pause` and `stop` let the iteration finish.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loop import agents, trust
from loop.agents.base import Adapter
from loop.agents.turn import Judgement, error_signature, judge
from loop.core import engine
from loop.core.errors import LoopdeckError
from loop.core.model import Aggregate, LoopState, Result, Settings, StopInput, Turn, replace
from loop.core.redact import redact
from loop.core.timeutil import utcnow
from loop.drivers import writer
from loop.processes import agent, sandbox
from loop.processes.supervisor import Supervisor
from loop.sources.aggregate import SourceConfig, check_all
from loop.store import control
from loop.store.journal import Event, Journal, render_line
from loop.store.paths import Workspace
from loop.store.state import StateError, StateStore
from loop.trust import key as trust_key
from loop.views.summary import Tally, Whole, progress_line, summary_lines

if TYPE_CHECKING:  # the checks' module is imported when a loop has checks (a run without pays nothing)
    from loop import verify

EXIT_DONE, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 130, 143
ANSWER_HINT = (
    'loopdeck: the loop waits for your answer: `loopdeck answer "…"` from another terminal, or the monitor'
)
"""Said under the agent's question: how a person answers it (the runner waits for that)."""
MAX_MARK_FILES = 20_000
"""Outside git, the progress fingerprint looks at this many files at most."""
_SKIP_DIRS = frozenset({".git", ".claude", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache"})


@dataclass
class Options:
    agent: str = agent.DEFAULT_AGENT
    """The agent command (or a CLI's name: `codex` means its default command)."""
    agent_format: str | None = None
    """How to read its output (`claude`, `codex`, `gemini`, `opencode`, `text`); None: by program."""
    fallback_agent: str | None = None
    """The agent the runner turns to while the first one is held by a usage limit."""
    fallback_format: str | None = None
    iteration_timeout: float | None = 1800.0
    retries: int = 2
    backoff: tuple[float, ...] = (1.0, 5.0, 15.0)
    commit: bool = False
    headless: bool = True
    """Headless: a loop waiting for a person ends the run with a summary (nobody is there)."""
    verify_timeout: float = 600.0
    poll: float = 0.2
    agent_given: bool = False
    """The agent command came from this command line (not from the state file)."""
    fallback_given: bool = False
    """The fallback agent came from this command line."""
    trusted: bool = False
    """`--yes`: run the commands the state file names even if nobody on this machine chose them."""
    confirm: Callable[[list[str]], bool] | None = None
    """Asks a person at a terminal to confirm such commands; None when nobody can answer."""
    sandbox: str | None = None
    """`auto`, `on` or `off` (`loop.processes.sandbox`); None: `LOOPDECK_SANDBOX`, else `auto`."""
    sandbox_net: bool = True
    """Whether an agent in the sandbox reaches the network."""
    sandbox_env: tuple[str, ...] = ()
    """Variables passed into the sandbox by name, beyond the ones an agent needs."""

    def record(self) -> dict[str, Any]:
        recorded: dict[str, Any] = {
            "agent": self.agent,
            "iteration_timeout": self.iteration_timeout,
            "retries": self.retries,
            "commit": self.commit,
            "headless": self.headless,  # `loopdeck resume` restarts the runner as it was run
        }
        if self.agent_format:
            recorded["agent_format"] = self.agent_format
        if self.fallback_agent:
            recorded["fallback_agent"] = self.fallback_agent
            if self.fallback_format:
                recorded["fallback_format"] = self.fallback_format
        return recorded


@dataclass
class Backend:
    """One agent CLI the runner can turn to, and until when a usage limit holds it."""

    role: str
    """`agent` (the first choice) or `fallback`."""
    choice: agents.Choice
    until: datetime | None = None
    waits: int = 0
    """Limits in a row that did not say when they reset (each waits longer)."""

    @property
    def name(self) -> str:
        return self.choice.adapter.name

    @property
    def command(self) -> str:
        return self.choice.command

    def env(self) -> dict[str, str]:
        """The agent's environment: ours, plus what its default command needs."""
        adapter = self.choice.adapter
        if self.choice.command == adapter.default_command and adapter.default_env:
            return {**adapter.default_env, **os.environ}
        return dict(os.environ)

    def free(self, now: datetime) -> bool:
        return self.until is None or now >= self.until


class StartedMark:
    """The workspace's progress fingerprint: git HEAD and changes, or, outside a git repository,
    the names, sizes and times of its files (so a folder without git is not "stuck" while the
    agent changes files). Its git look starts now and is read later (`result`, kept once read):
    a turn's mark starts as the turn ends, is read by the decision only when the task counts
    did not change, and otherwise just before the next agent starts, so git runs beside the
    runner's own work (the journal, the task sources, the state written)."""

    def __init__(self, root: Path) -> None:
        from loop.repo import gitstate

        self.root = root
        self.look = gitstate.Fingerprint(root)
        self.value: str | None = None

    def result(self) -> str:
        if self.value is None:
            mark = self.look.result()
            self.value = mark if mark is not None else _files_mark(self.root)
        return self.value

    def close(self) -> None:
        self.look.close()


def _files_mark(root: Path) -> str:
    """Outside git: the names, sizes and times of the workspace's files."""
    digest = hashlib.sha256()
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            with contextlib.suppress(OSError):
                info = os.stat(os.path.join(folder, name), follow_symlinks=False)
                digest.update(f"{folder}/{name}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
            seen += 1
            if seen >= MAX_MARK_FILES:
                return digest.hexdigest()
    return digest.hexdigest()


def _added(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    if not a or not b:
        return a or b
    return {key: a.get(key, 0) + b.get(key, 0) for key in {*a, *b}}


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
        self.store = StateStore(ws, lock_timeout=30)
        self.journal = Journal(ws.journal)
        sink = out or (lambda line: print(line, flush=True))
        self.out: Callable[[str], None] = lambda line: sink(redact(line))
        """Every line the runner prints, redacted: a detached runner prints into runner.log."""
        self.now = now
        self.signal: int | None = None
        self.tally = Tally()
        self.offset = 0
        """The state's control queue offset as last written: commands past it are pending."""
        self.checks: list[verify.Check] = []
        self.supervisor: Supervisor | None = None
        """Kills the agent's process tree when this runner dies, however it dies."""
        self.final: LoopState | None = None
        """The state as the last decision left it (an archived loop has no state file)."""
        self.confirmed: dict[str, Any] | None = None
        """What a person confirmed for this loop, as this run last knew it (`trust.pinned`)."""
        self.backends = [Backend("agent", agents.resolve(options.agent, options.agent_format))]
        if options.fallback_agent:
            self.backends.append(
                Backend("fallback", agents.resolve(options.fallback_agent, options.fallback_format))
            )
        self.current = self.backends[0]
        """The backend the next turn runs on: the first, unless a usage limit holds it."""
        self.identity_said = False
        """Whether this run told the person git has no identity for its commits (said once)."""
        self.looking: StartedMark | None = None
        """The mark of the turn that just ended, started as it ended: the next turn's start."""
        self.start: str | None = None
        """The workspace's mark when the current turn started."""
        self.box: sandbox.Status | None = None
        """The sandbox agent turns run in, once known (`sandboxed`)."""
        self.continued = False
        """This run took over a loop started earlier: its summary tells this run and the whole loop."""

    # --- the journal, echoed as log lines ----------------------------------------------------

    def event(self, kind: str, iteration: int | None, data: dict[str, Any] | None = None) -> None:
        self.echo(self.journal.append(kind, iteration, data))

    def echo(self, event: Event) -> None:
        if event.kind in ("command-applied",):
            return
        self.out(render_line(event))
        if event.kind == "question" and not self.options.headless:
            self.out(ANSWER_HINT)  # headless, the summary's next step says it

    # --- setup ---------------------------------------------------------------------------------

    def sandboxed(self) -> sandbox.Status:
        """The sandbox agent turns run in (looked for once); LoopdeckError for `--sandbox on`
        where none can start."""
        if self.box is None:
            self.box = sandbox.detect(sandbox.choose(self.options.sandbox))
        return self.box

    def sandbox_line(self) -> str:
        """`bwrap (bubblewrap 0.8.0), network on`, or why there is none: what `status` shows."""
        return sandbox.describe(self.sandboxed(), self.options.sandbox_net)

    def sandbox_for(
        self, root: Path | None = None, beside: bool = False
    ) -> tuple[sandbox.Spec, sandbox.Status] | None:
        """One turn's sandbox: `root` (the workspace, or a task's worktree) writable; `beside`:
        other turns run meanwhile, or loopdeck's git runs next (a check), so the repository's
        git folder is the agent's to read only (`Spec.beside`)."""
        status = self.sandboxed()
        if not status.on:
            return None
        options = self.options
        spec = sandbox.Spec(
            root or self.ws.root, self.ws.root, options.sandbox_net, options.sandbox_env, beside
        )
        return spec, status

    def refused(
        self, tail: bytes, n: int | None, adapter: Adapter, cwd: Path, worker: str | None = None
    ) -> str | None:
        """What the sandbox refused the agent, journaled; the line its next prompt carries. Read
        in what its tools printed, where the CLI's output leaves that out (`tool_output`)."""
        if self.box is None or not self.box.on:
            return None
        tools = adapter.tool_output(tail.decode("utf-8", "replace"), cwd, os.environ)
        lines = sandbox.refusals(tail if tools is None else tools.encode("utf-8"))
        if not lines:
            return None
        data: dict[str, Any] = {"lines": [redact(line) for line in lines]}
        if worker is not None:
            data["worker"] = worker
        self.event("sandbox-refused", n, data)
        return sandbox.refused_note(data["lines"])

    def prepare(self, create: Callable[[], LoopState] | None) -> LoopState:
        """Load or create the state, check the verification commands, claim the loop."""
        boxed = self.sandbox_line()  # `--sandbox on` without one: refused before anything is written
        if not self.store.exists():
            # A new loop: what refuses it (no PROMPT, a check not allowed) does so before the
            # lock file, or anything else, is written.
            self.checks = self.checks_of(self.new_loop(create))
        with self.store.locked():
            state = self.store.read()
            if state is not None and state.status == "completed":
                # Completed but never archived (the runner died between the two): finish that
                # first, so a new run is a new loop, not a failed one.
                writer.finish_archive(self.ws, self.journal, state)
                state = None
            fresh = state is None
            if state is None:
                state = self.new_loop(create)
            # Refused before anything is saved: a bad --verify must not poison later runs.
            self.checks = self.checks_of(state)
            if not fresh and state.driver == "runner" and state.pid and state.pid != os.getpid():
                from loop.store.proc import alive

                if alive(state.pid):
                    raise LoopdeckError(
                        f"a runner (pid {state.pid}) is already driving the loop in {self.ws.root}"
                    )
            runner = {**self.options.record(), "sandbox": boxed}
            claim = replace(self.settings, driver="runner", pid=os.getpid(), runner=runner)
            result = engine.configure(state, claim, self.now())
            assert result.state is not None
            confirm = self.confirm(result.state, fresh)  # before anything runs or is saved
            if fresh:
                writer.start(self.ws, self.store, self.journal, state)
            writer.carry_out(self.ws, self.store, self.journal, state, result, self.now(), echo=self.echo)
            state = result.state
            if confirm:
                self.record(state)
            self.confirmed = trust.pinned(state)
            self.offset = state.control_offset
        self.continued = not fresh
        if fresh:
            self.event("loop-started", 0, writer.started_data(state, driver="runner"))
        else:
            self.note_cut_short()
        started: dict[str, Any] = {"pid": os.getpid(), "agent": self.options.agent}
        if self.options.fallback_agent:
            started["fallback"] = self.options.fallback_agent
        started["sandbox"] = boxed
        self.event("runner-started", state.iteration, started)
        return state

    def new_loop(self, create: Callable[[], LoopState] | None) -> LoopState:
        if create is None:
            raise LoopdeckError(f"no loop in {self.ws.root}: give a PROMPT to start one")
        return create()

    def checks_of(self, state: LoopState) -> list[verify.Check]:
        """The loop's verification commands (this run's, else the state's), each allowed or
        refused (LoopdeckError) before the loop runs."""
        commands = self.settings.verify if self.settings.verify is not None else state.verify
        allow = self.settings.verify_allow
        if allow is None:
            allow = state.extra.get("verify_allow") or []
        if not isinstance(allow, list):
            raise LoopdeckError(f"{self.ws.state}: verify_allow must be a list of commands")
        if not commands:
            return []
        from loop import verify

        return [verify.check(cmd, [str(a) for a in allow], cwd=self.ws.root) for cmd in commands]

    def note_cut_short(self) -> None:
        """The iteration an earlier runner started and never ended (killed mid-turn) is
        journaled as cut short: the journal says why its work is done again."""
        try:
            events = self.journal.tail(400).events
        except OSError:
            return
        n = cut_short(events)
        if n is None:
            return
        ran = [e for e in events if e.kind == "runner-started"]
        pid = ran[-1].data.get("pid") if ran else None
        runner = f"its runner (pid {pid})" if pid else "its runner"
        why = f"iteration {n} was cut short: {runner} ended during it, before the turn was over"
        self.event("agent-interrupted", n, {"reason": why})

    def record(self, state: LoopState) -> None:
        try:
            trust.record(self.ws, state, "run")
        except OSError as exc:
            self.out(f"loopdeck: warning: could not record the confirmation ({exc}); asked again next run")

    def reconfirm(self, state: LoopState, given: set[str]) -> None:
        """Settings a driver adds after `prepare` (the parallel driver's graph and audit): the
        person's when this command line gave them; anything else stays unconfirmed."""
        if not trust.unconfirmed(self.ws, state):
            self.confirmed = trust.pinned(state)
            return
        from loop.trust.person import refuse_inside_agent

        pending = trust.unconfirmed(self.ws, state, given=given)
        if pending:
            listed = "\n".join(f"  {c}" for c in pending)
            raise LoopdeckError(
                f"the loop in {self.ws.root} names what nobody on this machine confirmed:\n{listed}"
            )
        refuse_inside_agent("confirming a loop's task graph or audit")
        self.record(state)
        self.confirmed = trust.pinned(state)

    def unconfirmed(self, state: LoopState) -> tuple[str, ...]:
        """What the state names now that nobody here confirmed: the file may change under a
        running loop (the agent can write it). What this run confirmed itself is known without
        reading the record again."""
        if trust.pinned(state) == self.confirmed:
            return ()
        pending = trust.unconfirmed(self.ws, state)
        if not pending:
            self.confirmed = trust.pinned(state)  # a person confirmed the change meanwhile
        return tuple(pending)

    def given(self, fresh: bool) -> set[str]:
        """The pinned values this run's command line gives: a person's own choice."""
        if fresh:
            return set(trust.LABELS)
        given = {"agent"} if self.options.agent_given else set()
        if self.options.fallback_given:
            given.add("fallback_agent")
        for name, value in (
            ("verify", self.settings.verify),
            ("allowed", self.settings.verify_allow),
            ("notify", self.settings.notify),
        ):
            if value is not None:
                given.add(name)
        return given

    def confirm(self, state: LoopState, fresh: bool) -> bool:
        """Whether this run must record a confirmation of `state` (the loop as this command line
        leaves it). What the file names that nobody here chose (a state that came with a
        repository, or changed since) runs only once a person confirms it: at the terminal, or
        with --yes; never inside an agent's session, where the command line is the agent's."""
        from loop.trust.person import refuse_inside_agent

        if self.options.trusted:
            refuse_inside_agent("`--yes`")
        changed = trust.unconfirmed(self.ws, state)
        if not changed:
            return False
        refuse_inside_agent("confirming a loop (a new one, or options that change what it runs)")
        pending = trust.unconfirmed(self.ws, state, given=self.given(fresh))
        asked = self.options.confirm
        if pending and not self.options.trusted and (asked is None or not asked(pending)):
            listed = "\n".join(f"  {c}" for c in pending)
            raise LoopdeckError(
                f"the loop in {self.ws.root} names what nobody on this machine confirmed:\n"
                f"{listed}\nNothing was run. Review it with `loopdeck trust` (or `loopdeck run --yes`)."
            )
        return True

    # --- the decision --------------------------------------------------------------------------

    def decide(
        self,
        last_text: str | None,
        failure: str | None = None,
        verified: bool = False,
        turn: Turn | None = None,
    ) -> Result:
        """Ask the engine what the turn that just ended means, and write its answer down. A state
        file found corrupt is recovered first (`recover`), and the turn decided on what it holds."""
        try:
            return self._decide(last_text, failure, verified, turn)
        except StateError as exc:
            self.recover(exc)  # CorruptState when it cannot be
            return self._decide(last_text, failure, verified, turn)

    def _decide(
        self, last_text: str | None, failure: str | None, verified: bool, turn: Turn | None
    ) -> Result:
        with self.store.locked():
            state = self.store.read()
            if state is None:
                return Result("allow", None)
            commands, bad, end = control.read_unapplied(
                self.ws, state.control_offset, self.journal, trust_key.reader(self.ws.root)
            )
            stop = StopInput(
                last_text=last_text,
                driver="runner",
                verification_failure=failure,
                verified=verified,
                ralph_active=self.ws.ralph_state.exists(),
                turn=turn,
                unconfirmed=self.unconfirmed(state),
            )
            now = self.now()
            sources = self.count(state) if engine.needs_sources(state, stop, commands) else None
            if engine.needs_look(state, turn, commands, sources):  # read last: git ran meanwhile
                assert turn is not None
                stop = replace(stop, turn=replace(turn, changed=self.workspace_changed()))
            result = engine.decide(state, stop, commands, sources, now)
            if turn is not None:  # after a turn: the tasks done so far (counted once for both), what is next
                self.progress(state, sources, result if result.blocked else None)
            if result.state is not None:
                result.state.pid = os.getpid()
            writer.carry_out(self.ws, self.store, self.journal, state, result, now, end, bad, self.echo)
            self.offset = result.state.control_offset if result.state is not None else end
            if result.state is not None:
                self.final = result.state
        return result

    def count(self, state: LoopState) -> Aggregate:
        return check_all(SourceConfig.from_state(self.ws, state))

    # --- a state file found corrupt mid-run ------------------------------------------------------

    def recover(self, exc: StateError) -> None:
        """The state file no longer reads (a person's edit, a disk problem, the agent): put this
        loop's backup back (the corrupt file kept as `….corrupt-<time>`), journal it and tell
        the person, and the loop goes on. Without a backup of this loop, nothing is overwritten:
        the loop escalates (CorruptState) and `loopdeck resume` offers to rebuild it."""
        try:
            self.store.read()
        except StateError as found:
            problem = str(found)
        else:
            raise exc  # the file reads: a problem of another kind, not ours to mend here
        n = self.final.iteration if self.final is not None else None
        why = "there is no backup of this loop to restore"
        if self.ws.backup.exists() and writer.backup_of_this_loop(self.ws):
            try:
                restored = writer.restore_backup(self.ws, self.now())
            except (StateError, OSError) as failed:
                why = f"its backup could not be restored ({failed})"
            else:
                kept = _newest_corrupt(self.ws)
                where = f"kept as {kept}" if kept else "kept beside it"
                message = (
                    f"the state file was corrupt ({problem}); it is {where}; the backup of this loop "
                    f"is restored (iteration {restored.iteration}) and the loop goes on"
                )
                self.event("warning", restored.iteration, {"message": message, "corrupt": problem})
                self.final = restored
                self.alert(restored, message, restored.iteration)
                return
        elif self.ws.backup.exists():
            why = "the backup is of an earlier loop, not this one"
        reason = (
            f"the state file is corrupt ({problem}) and {why}: it is left as it is; "
            "`loopdeck resume` rebuilds the state from the journal"
        )
        self.event("escalation", n, {"reason": reason, "kind": "corrupt-state"})
        self.alert(self.final, reason, n)
        raise CorruptState(reason)

    def alert(self, state: LoopState | None, text: str, n: int | None) -> None:
        """Tell the person as an escalation is told: the targets they confirmed for this loop."""
        if state is None or not state.notify:
            return
        from loop.drivers import notify

        with contextlib.suppress(Exception):  # a notification is a courtesy: the journal has it
            due = notify.messages([("escalation", {"reason": text})], self.ws.root.name, n or 0)
            notify.send_detached(self.ws.root, trust.confirmed_targets(self.ws, state), due)

    def workspace_changed(self) -> bool:
        """Did the turn that just ended change the workspace? Its mark against its start's."""
        if self.looking is None:
            self.looking = StartedMark(self.ws.root)
        return self.start is None or self.looking.result() != self.start

    def take_start(self) -> str:
        """The mark a turn starts from: the look the last turn started as it ended (waited for
        only now, before the agent changes anything), or one taken now."""
        look, self.looking = self.looking, None
        return (look if look is not None else StartedMark(self.ws.root)).result()

    def forget_start(self) -> None:
        """The loop waits (for a person, for a reset): what changes meanwhile is nobody's turn.
        The next turn starts from a look taken as it starts; the last turn's git process ends
        now rather than wait unread for as long as the loop does."""
        self.drop_look()
        self.start = None

    def drop_look(self) -> None:
        """A turn's mark nobody will read (the runner stops): its git process ends now."""
        look, self.looking = self.looking, None
        if look is not None:
            look.close()

    def pending_interrupt(self) -> str | None:
        """Why the running agent must end now: a signal, or a skip/complete in the queue."""
        if self.signal is not None:
            return f"signal {signal.Signals(self.signal).name}"
        commands, _bad, _end = control.read_since(self.ws.control, self.offset)
        if any(command.kind in ("skip", "complete") for command in commands):
            # the journal is read only now, rarely: a command applied already ends nothing
            commands, _bad, _end = control.read_unapplied(
                self.ws, self.offset, self.journal, trust_key.reader(self.ws.root)
            )
        for command in commands:
            if command.kind in ("skip", "complete") and engine.refusal(command) is None:
                return command.kind
        return None

    # --- one iteration -------------------------------------------------------------------------

    def iterate(self, state: LoopState, prompt: str) -> tuple[Turn, str | None, str | None, bool]:
        """Run the agent (with retries) and the verification commands.

        Returns what the runner saw (the Turn), the agent's final text, the verification
        failure if any, and whether verification ran and passed. A usage limit is no failure:
        with a fallback agent free, the turn goes to it at once; else the engine waits.
        """
        n = state.iteration
        self.tally.iterations += 1
        backend = self.backend_for_turn(n)
        self.event(
            "iteration-started",
            n,
            {"max_iterations": state.max_iterations, "task": state.current_task, "agent": backend.name},
        )
        logs = self.ws.iteration_logs(state.started_at, state.loop_id)
        attempts = 1 + max(0, self.options.retries)
        attempt, runs = 1, 0
        run: agent.Run | None = None
        judged: Judgement | None = None
        usage: dict[str, int] | None = None
        promise = state.completion_promise if state.completion_promise not in ("", "null") else None
        if self.looking is not None or self.start is None:
            # after a turn that was not judged (failed, interrupted, limited) the start stays:
            # what that turn changed is progress for the next one judged
            self.start = self.take_start()
        while True:
            log = logs / (f"{n:04d}.log" if runs == 0 else f"{n:04d}.retry{runs}.log")
            runs += 1
            env = backend.env()
            box = self.sandbox_for()
            run = agent.run(
                agents.in_sandbox(backend.choice, box is not None),
                prompt,
                self.ws.root,
                log,
                self.options.iteration_timeout,
                self.pending_interrupt,
                poll=self.options.poll,
                env=self._child_env(env),
                register=self._register(),
                sandbox=box,
            )
            self._release()
            if run.interrupted:
                break
            judged = judge(
                backend.choice.adapter,
                run.tail,
                run.exit_code,
                now=self.now(),
                timed_out=run.timed_out,
                timeout_s=self.options.iteration_timeout,
                start_error=run.error,
                env=env,
                promise=promise,
                echoed=prompt,
            )
            usage = _added(usage, judged.usage)  # a retried turn costs every attempt
            if judged.limited is not None:
                # Not a failure: no retry spent. Another agent if one is free, else the engine
                # makes the loop wait for the (earliest) reset.
                other = self.on_limit(backend, judged, n)
                if other is not None:
                    backend = other
                    continue
                resets = judged.resets_at if len(self.backends) == 1 else self.earliest_reset()
                return Turn(limited=judged.limited, resets_at=resets, usage=usage), None, None, False
            backend.waits = 0
            if judged.ok:
                break
            why = str(judged.failure)
            self.tally.agent_failures.append(f"iteration {n}: {why}")
            self.event(
                "agent-failed",
                n,
                {"attempt": attempt, "of": attempts, "reason": redact(why), "log": str(log)},
            )
            if run.error or attempt == attempts:
                break
            delay = self.options.backoff[min(attempt - 1, len(self.options.backoff) - 1)]
            self.event("retry", n, {"in_s": delay, "attempt": attempt + 1})
            if self.sleep(delay):
                break
            attempt += 1
        assert run is not None
        if run.interrupted or judged is None:
            self.event("agent-interrupted", n, {"reason": run.interrupted})
            return Turn(interrupted=run.interrupted), None, None, False
        refused = self.refused(run.tail, n, backend.choice.adapter, self.ws.root)  # a failed turn's too
        if not judged.ok:
            failed = self.tally.agent_failures[-1] if self.tally.agent_failures else str(judged.failure)
            error = error_signature(str(judged.failure))  # without "iteration N: ": comparable
            return Turn(failure=failed, error=error, usage=usage, refused=refused), None, None, False
        failure = self.run_checks(n) if self.checks else None
        unresolved: tuple[str, ...] = ()
        if failure is None and self.options.commit:
            unresolved = self.commit(n)
        self.looking = StartedMark(self.ws.root)  # what the turn left, checks and commit included
        duration = round(time.monotonic() - self.tally.started, 1)
        spent = spent_data(backend.name, judged, usage)
        self.tally.turns.append({"iteration": n, **spent})
        self.event("iteration-completed", n, {"duration_s": run.duration_s, "elapsed_s": duration, **spent})
        turn = Turn(
            error=error_signature(failure) if failure else None,
            usage=usage,
            denied=judged.facts.denied,
            denied_hint=judged.facts.denied_hint,
            unresolved=unresolved,
            refused=refused,
        )
        return turn, judged.text, failure, bool(self.checks) and failure is None

    # --- which agent: the first choice, or the fallback while a usage limit holds it -----------

    def backend_for_turn(self, n: int) -> Backend:
        """The agent the engine picks for this turn: the first choice again once its limit has
        reset, else the one in use."""
        now = self.now()
        chosen = engine.agent_for_turn(
            [b.until for b in self.backends], self.backends.index(self.current), now
        )
        if chosen is not None and self.backends[chosen] is not self.current:
            to = self.backends[chosen]
            why = f"the usage limit of {to.name} reset" if chosen == 0 else f"{self.current.name} is held"
            self.switch(to, n, why)
        return self.current

    def on_limit(self, backend: Backend, judged: Judgement, n: int) -> Backend | None:
        """Note until when `backend` is held; the free agent the engine turns to now, if any."""
        now = self.now()
        backend.until, backend.waits = engine.limit_until(judged.resets_at, backend.waits, now)
        chosen = engine.agent_for_turn([b.until for b in self.backends], self.backends.index(backend), now)
        if chosen is None:
            return None
        other = self.backends[chosen]
        why = f"{backend.name} hit a usage limit ({judged.limited}); back after {backend.until.isoformat()}"
        self.switch(other, n, why, backend.until)
        return other

    def earliest_reset(self) -> str | None:
        held = [b.until for b in self.backends if b.until is not None]
        return min(held).isoformat() if held else None

    def switch(self, to: Backend, n: int, reason: str, until: datetime | None = None) -> None:
        data: dict[str, Any] = {"from": self.current.name, "to": to.name, "role": to.role, "reason": reason}
        if until is not None:
            data["until"] = until.isoformat()
        self.current = to
        self.event("agent-switched", n, data)

    def run_checks(self, n: int, cwd: Path | None = None) -> str | None:
        """The verification commands, in the workspace (or `cwd`: a task's worktree); the
        failures' output, or None when every one passed."""
        from loop import verify

        failures = []
        for item in self.checks:
            self.event("verification-started", n, {"command": item.command})
            outcome = verify.run(
                item,
                cwd or self.ws.root,
                self.options.verify_timeout,
                interrupted=lambda: self.signal is not None,
                register=self._register(),
                env=self._child_env(),
                sandbox=self.sandbox_for(cwd, beside=True),
            )
            self._release()
            if outcome.interrupted:
                break  # a signal: the loop stops or pauses now, not after the checks
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
        return "\n\n".join(failures)

    def commit(self, n: int) -> tuple[str, ...]:
        """Commit the iteration's work; never over a merge left unresolved (the files with
        conflicts are returned, and the engine makes the loop wait for a person)."""
        from loop.repo import gitstate, worktrees

        try:
            if worktrees.is_repo(self.ws.root):
                unresolved = tuple(worktrees.unresolved(self.ws.root))
                if unresolved:
                    return unresolved
        except Exception:  # not a repository git can read: the commit below says why
            pass
        if not self.identity_said:
            self.identity_said = True
            with contextlib.suppress(Exception):
                if gitstate.missing_identity(self.ws.root):
                    self.event(
                        "warning",
                        n,
                        {
                            "message": f"git has no identity (user.name, user.email) in {self.ws.root}: "
                            f"loopdeck commits as {gitstate.STAND_IN[0]} <{gitstate.STAND_IN[1]}>; "
                            f"to commit as you: {gitstate.IDENTITY_HELP}"
                        },
                    )
        try:
            sha = gitstate.commit(self.ws.root, f"loopdeck: iteration {n}")
        except Exception as exc:  # a repo problem must not lose the run: say it and go on
            self.event("warning", n, {"message": f"commit failed: {exc}"})
            return ()
        if sha:
            self.tally.commits.append(sha)
            self.event("commit", n, {"sha": sha})
        return ()

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
        from loop.core.timeutil import parse_iso

        until = parse_iso(str((state.waiting_for or {}).get("until", "")))
        self.out(f"loopdeck: waiting for the usage limit to reset ({(state.waiting_for or {}).get('until')})")
        while self.signal is None:
            if until is None or self.now() >= until or self.queued():
                return True
            time.sleep(min(self.options.poll * 5, max(0.05, (until - self.now()).total_seconds())))
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
        self.supervisor = Supervisor()
        try:
            return self._run(create)
        finally:
            self.drop_look()
            self.supervisor.close()
            self.supervisor = None
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _register(self) -> Callable[[int], None] | None:
        """Tells the supervisor of a child the moment it started: it dies with the runner."""
        if self.supervisor is None:
            return None
        return self.supervisor.register

    def _child_env(self, env: dict[str, str] | None = None) -> dict[str, str] | None:
        """The children's environment (`env`, else ours), marked: what they leave behind is
        found and killed."""
        if self.supervisor is None:
            return env
        return self.supervisor.env(env)

    def _release(self) -> None:
        if self.supervisor is not None:
            self.supervisor.release()

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signal = signum

    def read_state(self) -> LoopState | None:
        """The state as it is on disk; one found corrupt is recovered first (`recover`)."""
        try:
            return self.store.read()
        except StateError as exc:
            self.recover(exc)
            return self.store.read()

    def _run(self, create: Callable[[], LoopState] | None) -> int:
        try:
            return self._drive(create)
        except CorruptState as exc:
            return self.finish("escalated", str(exc))

    def _drive(self, create: Callable[[], LoopState] | None) -> int:
        state = self.prepare(create)
        if state.waiting_for is not None and self.options.headless and not self.queued():
            return self.finish(*_ending(state, still=True))
        result = self.decide(None)
        while True:
            if self.signal is not None:
                return self.on_signal()
            if result.blocked and result.state is not None:
                state = result.state
                turn, text, failure, verified = self.iterate(state, result.reason or state.prompt)
                if self.signal is not None:
                    return self.on_signal()
                result = self.decide(text, failure, verified, turn)
                continue
            if result.effects.archive is not None:
                return self.finish("completed", str(result.effects.archive.get("reason")), archived=True)
            current = result.state if result.state is not None else self.read_state()
            if current is None:  # archived by someone else (a forced completion seen elsewhere)
                return self.finish("completed", "completed", archived=True)
            self.forget_start()
            if current.waiting_kind == "usage-limit" and current.status == "running":
                if not self.wait_for_reset(current):
                    return self.on_signal()
                result = self.decide(None)
                continue
            if current.status == "stopped":
                return self.finish("stopped", "stopped by user")
            if current.status == "paused":
                if self.options.headless and current.waiting_kind in ("escalation", "question"):
                    return self.finish(*_ending(current))
                if not self.wait_while_paused():
                    return self.on_signal()
                result = self.decide(None)
                continue
            return self.fail(f"the loop is {current.status}: the runner cannot drive it")

    def fail(self, reason: str) -> int:
        """The loop cannot go on: the engine ends it `failed` (with its summary), then ours."""
        with self.store.locked():
            state = self.store.read()
            if state is not None:
                now = self.now()
                counts = None
                with contextlib.suppress(Exception):
                    counts = self.count(state)
                result = engine.fail(state, reason, now, counts)
                writer.carry_out(self.ws, self.store, self.journal, state, result, now, echo=self.echo)
        return self.finish("failed", reason)

    def queued(self) -> bool:
        return bool(control.read_since(self.ws.control, self.offset)[0])

    def on_signal(self) -> int:
        signum = self.signal or signal.SIGTERM
        paused = signum == signal.SIGINT
        name = signal.Signals(signum).name
        with self.store.locked():
            state = self.store.read()
            if state is not None:
                now = self.now()
                result = engine.interrupt(state, paused, f"{name} to the runner", now)
                writer.carry_out(self.ws, self.store, self.journal, state, result, now, echo=self.echo)
        self.finish("interrupted" if paused else "stopped", f"{name} received")
        return EXIT_SIGINT if paused else EXIT_SIGTERM

    # --- output --------------------------------------------------------------------------------

    def progress(
        self, state: LoopState, counts: Aggregate | None = None, after: Result | None = None
    ) -> None:
        """`Progress: [1 of 3] ▰▰▰▱▱▱▱▱▱▱ 33% · next: "Write the parser" · stage: working · 2m 10s
        elapsed`: the sources as the decision counts them (or counted now); the turn the
        decision runs next (`after`, when it runs one): its task and stage; the loop's time."""
        try:
            counts = counts or self.count(state)
        except Exception:  # progress is a courtesy
            return
        done = sum(r.done for r in counts.sources if r.available)
        total = done + counts.pending_total
        if total:
            self.out(" · ".join([progress_line(done, total), *self.progress_more(state, after)]))

    def progress_more(self, state: LoopState, after: Result | None) -> list[str]:
        """The next turn's task and stage (as the decision's state says), and the time since the
        loop started (this run's when that is not known)."""
        from loop.core.timeutil import human_duration, parse_iso

        parts = []
        nxt = after.state if after is not None else None
        if nxt is not None:
            if nxt.current_task and not nxt.verification_mode:
                parts.append(f'next: "{nxt.current_task}"')
            parts.append(f"stage: {stage_of(nxt)}")
        started = parse_iso(state.started_at)
        seconds = (self.now() - started).total_seconds() if started else None
        if seconds is None or seconds < 0:
            seconds = time.monotonic() - self.tally.started
        parts.append(f"{human_duration(seconds)} elapsed")
        return parts

    def finish(self, how: str, reason: str, archived: bool = False) -> int:
        """Print and archive the summary; the exit status for `how`.

        The task figures are counted from the sources now, also for an archived loop (its
        state as the last decision left it): a forced completion with tasks open says so."""
        state = self.final if archived else None
        if not archived:
            with contextlib.suppress(StateError):  # a corrupt one is told, never archived
                state = self.store.read()
        counts: Aggregate | None = None
        with contextlib.suppress(Exception):
            counts = self.count(state) if state is not None else None
        folder = None
        recorded: dict[str, Any] | None = None
        if archived:
            from loop.store.archive import latest

            folder = latest(self.ws)
            with contextlib.suppress(OSError, ValueError):
                loaded = json.loads((folder / "summary.json").read_text()) if folder else None
                recorded = loaded if isinstance(loaded, dict) else None
        elif state is not None:
            folder = writer.archive_ending(self.ws, state, how, self.summary_data(how, reason, counts, state))
        whole = self.whole(state, recorded) if self.continued else None
        for line in summary_lines(how, reason, self.tally, counts, folder, state, recorded, whole):
            self.out(line)
        if how in ("completed", "stopped"):
            return EXIT_DONE
        return EXIT_FAILED

    def summary_data(
        self, how: str, reason: str, counts: Aggregate | None, state: LoopState | None
    ) -> dict[str, Any]:
        """The archived summary of a run that ended without completing: the engine's record
        of an ending (tasks by name, iterations, cost), with what this run saw."""
        base = engine.ending_summary(how, reason, state, counts, self.now()) if state is not None else {}
        this_run = round(time.monotonic() - self.tally.started, 1)
        return {
            "duration_s": this_run,  # the whole loop's (`base`) when its start is known
            **base,
            "outcome": how,
            "reason": reason,
            "iterations_this_run": self.tally.iterations,
            "agent_failures": self.tally.agent_failures,
            "verification_failures": self.tally.verify_failures,
            "commits": self.loop_commits() if self.continued else self.tally.commits,
            "commits_this_run": len(self.tally.commits),
            "pending_at_end": counts.pending_total if counts and not counts.uncertain else None,
            "usage": dict(state.usage) if state is not None else None,
            "duration_this_run_s": this_run,
        }

    def loop_commits(self) -> list[str]:
        """Every commit the loop made, in every run (the journal's since it started), and this
        run's (a commit the journal lost is still counted)."""
        try:
            events = self.journal.tail(1_000_000, where=lambda e: e.kind in LOOP_COMMITS).events
        except OSError:
            events = []
        starts = [i for i, e in enumerate(events) if e.kind == "loop-started"]
        shas = [str(e.data.get("sha")) for e in events[starts[-1] if starts else 0 :] if e.data.get("sha")]
        return list(dict.fromkeys([*shas, *self.tally.commits]))

    def whole(self, state: LoopState | None, recorded: dict[str, Any] | None) -> Whole:
        """The loop as a whole, for a run that took it over: how long since it started (as its
        archived summary says, else until now) and every commit it made."""
        seconds = (recorded or {}).get("duration_s")
        if not isinstance(seconds, int | float) and state is not None:
            from loop.core.timeutil import parse_iso

            started = parse_iso(state.started_at)
            seconds = (self.now() - started).total_seconds() if started else None
        return Whole(float(seconds) if isinstance(seconds, int | float) else None, self.loop_commits())


class CorruptState(LoopdeckError):
    """The state file is corrupt mid-run and no backup of this loop could be put back."""


def _newest_corrupt(ws: Workspace) -> Path | None:
    """The corrupt state file a restore just moved aside (`….corrupt-<time>`), if found."""
    try:
        found = list(ws.claude_dir.glob(ws.state.name + ".corrupt-*"))
        return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None
    except OSError:
        return None


LOOP_COMMITS = frozenset({"loop-started", "commit", "task-merged"})
"""The journal's events a loop's commits are counted from (since its `loop-started`)."""

ENDS_A_TURN = frozenset(
    {
        "iteration-completed",
        "agent-interrupted",
        "usage-limit",
        "blocked",
        "allowed",
        "escalation",
        "paused",
        "stopped",
        "failed",
        "completed",
    }
)
"""Events a driver journals once an iteration is over (however it ended)."""


def cut_short(events: list[Event]) -> int | None:
    """The iteration the journal shows started and never ended (its runner killed during it),
    or None."""
    for event in reversed(events):
        if event.kind in ENDS_A_TURN:
            return None
        if event.kind == "iteration-started":
            return event.iteration
    return None


def spent_data(name: str, judged: Judgement, usage: dict[str, int] | None) -> dict[str, Any]:
    """What one iteration used, as its journal event and the summary name it: the agent, its
    tokens, its cost (and whether that is loopdeck's estimate)."""
    usage = usage or {}
    data: dict[str, Any] = {"agent": name}
    if judged.facts.model:
        data["model"] = judged.facts.model
    tokens = {k: v for k, v in usage.items() if k.endswith("_tokens")}
    if tokens:
        data["tokens"] = tokens
    if "cost_micro_usd" in usage:
        data["cost_usd"] = round(usage["cost_micro_usd"] / 1_000_000, 6)
        if usage.get("estimated_cost_micro_usd"):
            data["estimated"] = True
    return data


def stage_of(state: LoopState) -> str:
    """What the loop's next turn is, as its state says: `working` on the tasks, `verification
    loop N of M` once they are done (`verifying` when it has no verification loops)."""
    if not state.verification_mode:
        return "working"
    if state.verify_loops <= 0:
        return "verifying"
    number = min(state.verify_loops, max(1, state.verify_loops - state.verification_remaining))
    return f"verification loop {number} of {state.verify_loops}"


def _ending(state: LoopState, still: bool = False) -> tuple[str, str]:
    """How a headless run ends on a loop that waits for a person, and why."""
    waiting = state.waiting_for or {}
    reason = str(waiting.get("reason") or "waiting for a person")
    if still:
        reason = f"still waiting for a person: {reason}"
    if waiting.get("kind") == "question":
        return "question", reason
    if waiting.get("kind") == "pause":  # a person's (or a signal's) pause: their resume lifts it
        return "paused", reason
    if waiting.get("escalation") == "max-iterations":
        return "limit", f"{reason}: needs a person"
    return "escalated", reason if still else f"{reason}: needs a person"


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `loopdeck run`")

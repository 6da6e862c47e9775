"""A run's plumbing, shared by the runner and the parallel driver: its options, the loop's state
file and journal, the lines it prints, what its summary counts, and a state file found corrupt
mid-run put back from its backup.

Both drivers hold one `Session` and hand it to the other parts (the claim, the turn, the
verification, the ending), so no part reaches into a driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from loop import trust
from loop.core.errors import LoopdeckError
from loop.core.model import Aggregate, LoopState
from loop.core.redact import redact
from loop.core.timeutil import utcnow
from loop.drivers import notify, writer
from loop.processes import agent
from loop.sources.aggregate import SourceConfig, check_all
from loop.store.journal import Event, Journal, render_line
from loop.store.paths import Workspace
from loop.store.state import StateError, StateStore, backup_of_this_loop
from loop.views.summary import Tally

ANSWER_HINT = (
    'loopdeck: the loop waits for your answer: `loopdeck answer "…"` from another terminal, or the monitor'
)
"""Said under the agent's question: how a person answers it (the runner waits for that)."""


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


class CorruptState(LoopdeckError):
    """The state file is corrupt mid-run and no backup of this loop could be put back."""


class Session:
    """The loop's files as one run sees them, and what the run prints and counts."""

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
        sink = out or (lambda line: print(line, flush=True))
        self.out: Callable[[str], None] = lambda line: sink(redact(line))
        """Every line the run prints, redacted: a detached runner prints into runner.log."""
        self.now = now
        self.tally = Tally()
        self.final: LoopState | None = None
        """The state as the last decision left it (an archived loop has no state file)."""

    # --- the journal, echoed as log lines ----------------------------------------------------

    def event(self, kind: str, iteration: int | None, data: dict[str, Any] | None = None) -> None:
        self.echo(self.journal.append(kind, iteration, data))

    def echo(self, event: Event) -> None:
        if event.kind in ("command-applied",):
            return
        self.out(render_line(event))
        if event.kind == "question" and not self.options.headless:
            self.out(ANSWER_HINT)  # headless, the summary's next step says it

    def warn(self, message: str, iteration: int | None = None) -> None:
        self.event("warning", iteration, {"message": message})

    def count(self, state: LoopState) -> Aggregate:
        """The loop's task sources, counted now."""
        return check_all(SourceConfig.from_state(self.ws, state))

    def counted(self, state: LoopState | None) -> Aggregate | None:
        """The count for a summary or a progress line: None when it cannot be had."""
        if state is None:
            return None
        try:
            return self.count(state)
        except Exception:  # the count is a courtesy: an ending never fails on it
            return None

    # --- a state file found corrupt mid-run ------------------------------------------------------

    def read_state(self) -> LoopState | None:
        """The state as it is on disk; one found corrupt is recovered first (`recover`)."""
        try:
            return self.store.read()
        except StateError as exc:
            self.recover(exc)
            return self.store.read()

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
        if self.ws.backup.exists() and backup_of_this_loop(self.ws):
            since = utcnow()  # the file moved aside is named for the wall clock's time
            try:
                restored = writer.restore_backup(self.ws, self.now())
            except (StateError, OSError) as failed:
                why = f"its backup could not be restored ({failed})"
            else:
                kept = self.store.newest_corrupt(since)
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
        with contextlib.suppress(Exception):  # a notification is a courtesy: the journal has it
            due = notify.messages([("escalation", {"reason": text})], self.ws.root.name, n or 0)
            notify.send_detached(self.ws.root, trust.confirmed_targets(self.ws, state), due)

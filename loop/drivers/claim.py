"""Claiming a loop for a run outside any session (the runner, the parallel driver): load or
create the state, refuse what nobody on this machine confirmed, take the loop over from a
runner that died, and journal the start.

What the state names that nobody here chose (a state that came with a repository, or changed
since) runs only once a person confirms it: at a terminal, or with `--yes`; never from inside
an agent's session, where the command line is the agent's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from loop import trust
from loop.core import engine
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState, Settings, replace
from loop.core.policy import DriverPolicy
from loop.drivers import writer
from loop.drivers.session import Session
from loop.store.journal import Event
from loop.store.proc import alive
from loop.trust.person import refuse_inside_agent

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


class Claim:
    """This run's hold on the loop, and what a person confirmed of it."""

    def __init__(self, session: Session, settings: Settings, policy: DriverPolicy) -> None:
        self.session = session
        self.settings = settings
        """Options given on this command line for an existing loop (the engine applies them)."""
        self.policy = policy
        """The policy the loop is claimed under: its name is what the state records."""
        self.confirmed: dict[str, Any] | None = None
        """What a person confirmed for this loop, as this run last knew it (`trust.pinned`)."""
        self.continued = False
        """This run took over a loop started earlier: its summary tells this run and the whole loop."""

    def prepare(
        self,
        create: Callable[[], LoopState] | None,
        sandbox_line: str,
        admit: Callable[[LoopState], object],
    ) -> LoopState:
        """Load or create the state, claim the loop, journal the start. `admit` refuses the
        loop's verification commands (LoopdeckError) before anything is written for a new loop,
        and before anything is saved for an existing one."""
        session, ws = self.session, self.session.ws
        if not session.store.exists():
            # A new loop: what refuses it (no PROMPT, a check not allowed) does so before the
            # lock file, or anything else, is written.
            admit(self.new_loop(create))
        with session.store.locked():
            state = session.store.read()
            if state is not None and state.status == "completed":
                # Completed but never archived (the runner died between the two): finish that
                # first, so a new run is a new loop, not a failed one.
                writer.finish_archive(ws, session.journal, state)
                state = None
            fresh = state is None
            if state is None:
                state = self.new_loop(create)
            admit(state)  # refused before anything is saved: a bad --verify must not poison later runs
            if not fresh:
                self.refuse_a_live_driver(state)
            recorded = {**session.options.record(), "sandbox": sandbox_line}
            claim = replace(self.settings, driver=self.policy.name, pid=os.getpid(), runner=recorded)
            result = engine.configure(state, claim, session.now(), self.policy)
            assert result.state is not None
            if self.confirm(result.state, fresh):  # before anything runs or is saved
                # Recorded before the state names it: a runner killed in between left a loop
                # its next run refused.
                self.record(result.state)
            if fresh:
                writer.start(ws, session.store, session.journal, state)
            writer.carry_out(
                ws, session.store, session.journal, state, result, session.now(), echo=session.echo
            )
            state = result.state
            self.confirmed = trust.pinned(state)
        self.continued = not fresh
        if fresh:
            session.event("loop-started", 0, writer.started_data(state, driver=self.policy.name))
        else:
            self.note_cut_short()
        started: dict[str, Any] = {"pid": os.getpid(), "agent": session.options.agent}
        if session.options.fallback_agent:
            started["fallback"] = session.options.fallback_agent
        started["sandbox"] = sandbox_line
        session.event("runner-started", state.iteration, started)
        return state

    def refuse_a_live_driver(self, state: LoopState) -> None:
        """Another process claimed the loop under the same driver and still runs: it drives it."""
        ours = state.driver == self.policy.name
        if ours and state.pid and state.pid != os.getpid() and alive(state.pid):
            raise LoopdeckError(
                f"a runner (pid {state.pid}) is already driving the loop in {self.session.ws.root}"
            )

    def new_loop(self, create: Callable[[], LoopState] | None) -> LoopState:
        if create is None:
            raise LoopdeckError(f"no loop in {self.session.ws.root}: give a PROMPT to start one")
        return create()

    def note_cut_short(self) -> None:
        """The iteration an earlier runner started and never ended (killed mid-turn) is
        journaled as cut short: the journal says why its work is done again."""
        try:
            events = self.session.journal.tail(400).events
        except OSError:
            return
        n = cut_short(events)
        if n is None:
            return
        ran = [e for e in events if e.kind == "runner-started"]
        pid = ran[-1].data.get("pid") if ran else None
        runner = f"its runner (pid {pid})" if pid else "its runner"
        why = f"iteration {n} was cut short: {runner} ended during it, before the turn was over"
        self.session.event("agent-interrupted", n, {"reason": why})

    # --- what a person confirmed -----------------------------------------------------------------

    def record(self, state: LoopState) -> None:
        try:
            trust.record(self.session.ws, state, "run")
        except OSError as exc:
            self.session.out(
                f"loopdeck: warning: could not record the confirmation ({exc}); asked again next run"
            )

    def reconfirm(self, state: LoopState, given: set[str]) -> None:
        """Settings a driver adds after `prepare` (the parallel driver's graph and audit): the
        person's when this command line gave them; anything else stays unconfirmed."""
        ws = self.session.ws
        if not trust.unconfirmed(ws, state):
            self.confirmed = trust.pinned(state)
            return
        pending = trust.unconfirmed(ws, state, given=given)
        if pending:
            listed = "\n".join(f"  {c}" for c in pending)
            raise LoopdeckError(
                f"the loop in {ws.root} names what nobody on this machine confirmed:\n{listed}"
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
        pending = trust.unconfirmed(self.session.ws, state)
        if not pending:
            self.confirmed = trust.pinned(state)  # a person confirmed the change meanwhile
        return tuple(pending)

    def given(self, fresh: bool) -> set[str]:
        """The pinned values this run's command line gives: a person's own choice."""
        if fresh:
            return set(trust.LABELS)
        options = self.session.options
        given = {"agent"} if options.agent_given else set()
        if options.fallback_given:
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
        leaves it), refusing (LoopdeckError) what nobody confirmed."""
        options, ws = self.session.options, self.session.ws
        if options.trusted:
            refuse_inside_agent("`--yes`")
        changed = trust.unconfirmed(ws, state)
        if not changed:
            return False
        refuse_inside_agent("confirming a loop (a new one, or options that change what it runs)")
        given = self.given(fresh)
        if state.extra.get("design"):
            given.discard("verify")  # a design's commands are the workspace's text: shown, confirmed
        pending = trust.unconfirmed(ws, state, given=given)
        asked = options.confirm
        if pending and not options.trusted and (asked is None or not asked(pending)):
            listed = "\n".join(f"  {c}" for c in pending)
            raise LoopdeckError(
                f"the loop in {ws.root} names what nobody on this machine confirmed:\n"
                f"{listed}\nNothing was run. Review it with `loopdeck trust` (or `loopdeck run --yes`)."
            )
        return True

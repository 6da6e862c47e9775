"""An agent's turn, as both local drivers run it: which agent (the first choice, or the
fallback while a usage limit holds it), the sandbox it runs in, what its output says
(`loop.agents.turn.judge`), what the sandbox refused it (journaled, and said in its next
prompt), and what it cost.

The runner runs one turn at a time (`loop.processes.agent.run`), the parallel driver several
in a pool (`loop.processes.workers`): how a turn's process is started is theirs, what a turn is
and means is here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from loop import agents
from loop.agents.base import Adapter
from loop.agents.turn import Judgement, judge
from loop.core import engine
from loop.core.model import spent_of
from loop.core.redact import redact
from loop.drivers.session import Session
from loop.processes import refusal, sandbox


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


def added(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    """Two turns' usage together (a retried turn costs every attempt)."""
    if not a or not b:
        return a or b
    return {key: a.get(key, 0) + b.get(key, 0) for key in {*a, *b}}


def spent_data(name: str, judged: Judgement, usage: dict[str, int] | None) -> dict[str, Any]:
    """What one iteration used, as its journal event and the summary name it: the agent, its
    tokens, its cost (and whether that is loopdeck's estimate)."""
    data: dict[str, Any] = {"agent": name}
    if judged.facts.model:
        data["model"] = judged.facts.model
    return {**data, **spent_of(usage)}


class Turns:
    """The agents a run turns to, the sandbox its turns run in, and how it reads them."""

    def __init__(self, session: Session) -> None:
        self.session = session
        options = session.options
        self.backends = [Backend("agent", agents.resolve(options.agent, options.agent_format))]
        if options.fallback_agent:
            self.backends.append(
                Backend("fallback", agents.resolve(options.fallback_agent, options.fallback_format))
            )
        self.current = self.backends[0]
        """The backend the next turn runs on: the first, unless a usage limit holds it."""
        self.box: sandbox.Status | None = None
        """The sandbox agent turns run in, once known (`sandboxed`)."""

    # --- the sandbox ---------------------------------------------------------------------------

    def sandboxed(self) -> sandbox.Status:
        """The sandbox agent turns run in (looked for once); LoopdeckError for `--sandbox on`
        where none can start."""
        if self.box is None:
            self.box = sandbox.detect(sandbox.choose(self.session.options.sandbox))
        return self.box

    def sandbox_line(self) -> str:
        """`bwrap (bubblewrap 0.8.0), network on`, or why there is none: what `status` shows."""
        return sandbox.describe(self.sandboxed(), self.session.options.sandbox_net)

    def sandbox_for(
        self, root: Path | None = None, beside: bool = False, read_only: tuple[Path, ...] = ()
    ) -> tuple[sandbox.Spec, sandbox.Status] | None:
        """One turn's sandbox: `root` (the workspace, or a task's worktree) writable; `beside`:
        other turns run meanwhile, or loopdeck's git runs next (a check), so the repository's
        git folder is the agent's to read only (`Spec.beside`)."""
        status = self.sandboxed()
        if not status.on:
            return None
        options, ws = self.session.options, self.session.ws
        spec = sandbox.Spec(
            root or ws.root, ws.root, options.sandbox_net, options.sandbox_env, beside, read_only
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
        lines = refusal.lines(tail if tools is None else tools.encode("utf-8"))
        if not lines:
            return None
        data: dict[str, Any] = {"lines": [redact(line) for line in lines]}
        if worker is not None:
            data["worker"] = worker
        self.session.event("sandbox-refused", n, data)
        return refusal.note(data["lines"])

    # --- reading a turn ---------------------------------------------------------------------------

    def judge(
        self,
        backend: Backend,
        tail: bytes,
        exit_code: int | None,
        *,
        timed_out: bool,
        start_error: str | None,
        env: Any,
        echoed: str,
        promise: str | None = None,
    ) -> Judgement:
        """What the agent's output says (`loop.agents.turn.judge`), read by its CLI's adapter."""
        return judge(
            backend.choice.adapter,
            tail,
            exit_code,
            now=self.session.now(),
            timed_out=timed_out,
            timeout_s=self.session.options.iteration_timeout,
            start_error=start_error,
            env=env,
            promise=promise,
            echoed=echoed,
        )

    def spent(
        self, iteration: int | str, backend: Backend, judged: Judgement, usage: dict[str, int] | None
    ) -> dict[str, Any]:
        """The turn's cost, counted for the summary; its journal data."""
        spent = spent_data(backend.name, judged, usage)
        self.session.tally.turns.append({"iteration": iteration, **spent})
        return spent

    # --- which agent: the first choice, or the fallback while a usage limit holds it -----------

    def backend_for_turn(self, n: int) -> Backend:
        """The agent the engine picks for this turn: the first choice again once its limit has
        reset, else the one in use."""
        now = self.session.now()
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
        now = self.session.now()
        backend.until, backend.waits = engine.limit_until(judged.resets_at, backend.waits, now)
        chosen = engine.agent_for_turn([b.until for b in self.backends], self.backends.index(backend), now)
        if chosen is None:
            return None
        other = self.backends[chosen]
        why = f"{backend.name} hit a usage limit ({judged.limited}); back after {backend.until.isoformat()}"
        self.switch(other, n, why, backend.until)
        return other

    def resets_at(self, judged: Judgement) -> str | None:
        """When the loop may go on after a usage limit: the agent's reset, or with a fallback
        the earliest of theirs."""
        if len(self.backends) == 1:
            return judged.resets_at
        held = [b.until for b in self.backends if b.until is not None]
        return min(held).isoformat() if held else None

    def switch(self, to: Backend, n: int, reason: str, until: datetime | None = None) -> None:
        data: dict[str, Any] = {"from": self.current.name, "to": to.name, "role": to.role, "reason": reason}
        if until is not None:
            data["until"] = until.isoformat()
        self.current = to
        self.session.event("agent-switched", n, data)

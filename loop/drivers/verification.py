"""The loop's verification commands as the local drivers hold them: allowed or refused before
the loop runs (`admit`), then run after a turn, on a merged tree or on a worker's approved task
(`run`) through `loop.verify.suite.run_all`, the one place every driver runs them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loop.core.errors import LoopdeckError
from loop.core.model import LoopState, Settings
from loop.core.timeutil import iso_s, utcnow
from loop.drivers.children import Children, Signals
from loop.drivers.session import Session
from loop.drivers.turn import Turns

if TYPE_CHECKING:
    from loop.verify import Check
    from loop.verify.suite import Verdict


INTERRUPTED = "the checks were interrupted before they finished (the runner was stopped)"


class Verification:
    """The loop's checks for this run, and running them where its agents run."""

    def __init__(
        self, session: Session, settings: Settings, turns: Turns, children: Children, signals: Signals
    ) -> None:
        self.session = session
        self.settings = settings
        self.turns = turns
        self.children = children
        self.signals = signals
        self.checks: list[Check] = []
        self.validation: dict[str, Any] | None = None
        """The last run's results as data (`validation_of`), None before any ran."""

    def __bool__(self) -> bool:
        return bool(self.checks)

    def admit(self, state: LoopState) -> None:
        """The loop's verification commands (this run's, else the state's), each allowed or
        refused (LoopdeckError) before the loop runs."""
        commands = self.settings.verify if self.settings.verify is not None else state.verify
        allow = self.settings.verify_allow
        if allow is None:
            allow = state.extra.get("verify_allow") or []
        if not isinstance(allow, list):
            raise LoopdeckError(f"{self.session.ws.state}: verify_allow must be a list of commands")
        if not commands:
            self.checks = []
            return
        # Here, not at the top: loop.verify costs ~15 ms (`-X importtime`) that a run without
        # checks would pay at start-up (tests/test_runner_overhead.py pins it).
        from loop.verify.suite import checks_of

        self.checks = checks_of(commands, allow, self.session.ws.root)

    def run(self, n: int, cwd: Path | None = None, counted: bool = True) -> str | None:
        """The verification commands, in the workspace (or `cwd`: a task's worktree); the
        failures' output, or None when every one passed. A signal that ended them is a failure
        (`INTERRUPTED`, not counted): nothing lands or completes on checks that did not finish."""
        self.validation = None
        if not self.checks:
            return None
        verdict = self.verdict(n, cwd)
        if verdict.interrupted:
            return INTERRUPTED
        self.validation = validation_of(verdict)
        if verdict.failure is None:
            return None
        if counted:  # a failure along the way (not the starting point before any turn)
            self.session.tally.verify_failures += 1
        return verdict.failure

    def verdict(self, n: int, cwd: Path | None = None, unless: threading.Event | None = None) -> Verdict:
        """The verification commands' verdict in `cwd` (default the workspace), as data: what
        the merge train runs in its lanes, several at once. Interrupted on a signal, or once
        `unless` is set (the train needs the verdict no more)."""
        from loop.verify.suite import run_all  # loaded with the checks (`admit`)

        session = self.session
        return run_all(
            self.checks,
            cwd or session.ws.root,
            timeout=session.options.verify_timeout,
            report=lambda kind, data: session.event(kind, n, data),
            interrupted=lambda: self.signals.caught is not None or (unless is not None and unless.is_set()),
            register=self.children.register(),
            released=self.children.release,
            env=self.children.env(),
            sandbox=self.turns.sandbox_for(cwd, beside=True),
        )


def validation_of(verdict: Any, git_clean: bool | None = None) -> dict[str, Any]:
    """A verdict's results as data (`Verdict.validation()`: per command, the summed test counts,
    whether the tests pass and the build succeeds), with when it ran; `git_clean` when known."""
    data: dict[str, Any] = dict(verdict.validation())
    data["ts"] = iso_s(utcnow())
    if git_clean is not None:
        data["git_clean"] = git_clean
    return data

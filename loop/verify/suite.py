"""Running a loop's verification commands: the one place every driver runs them.

The runner after a turn, the parallel driver on a merged tree (or after a task, with locks),
and a Temporal worker before it pushes a merge all call `run_all`: each command in turn (all of
them, so a failure's prompt names every one that failed), each in its own process group, its
output cut to the last lines and redacted. What differs between drivers is passed in: where the
events go (a journal, or nowhere: a workflow's history keeps the verdict), the sandbox, and
what tells a command to stop early.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.processes.sandbox import Spec, Status
from loop.verify import Check, Outcome, check, run

Report = Callable[[str, dict[str, Any]], object]
"""Told each command's `verification-started`, then `-passed` or `-failed` with its outcome."""


@dataclass(frozen=True)
class Verdict:
    """What the checks said: every failure's command, exit status and output tail."""

    failures: tuple[str, ...] = ()
    interrupted: bool = False
    """A signal ended a command early: the commands after it did not run."""

    @property
    def passed(self) -> bool:
        return not self.failures and not self.interrupted

    @property
    def failure(self) -> str | None:
        """The failures as one prompt for the agent, or None when none failed."""
        return "\n\n".join(self.failures) if self.failures else None


def checks_of(commands: Iterable[str], allow: Iterable[str], cwd: Path, **allowlist: Any) -> list[Check]:
    """Every command checked against the allowlist (`loop.verify.check`): CommandRefused for the
    first one refused, before any runs."""
    allowed = [str(a) for a in allow]
    return [check(command, allowed, cwd=cwd, **allowlist) for command in commands]


def failure_of(outcome: Outcome) -> str:
    """One failed command as the agent reads it."""
    return f"$ {outcome.command}\n(exit {outcome.exit_code})\n{outcome.tail}"


def run_all(
    checks: Sequence[Check],
    cwd: Path,
    *,
    timeout: float = 600.0,
    report: Report | None = None,
    interrupted: Callable[[], bool] | None = None,
    register: Callable[[int], None] | None = None,
    released: Callable[[], None] | None = None,
    env: Mapping[str, str] | None = None,
    sandbox: tuple[Spec, Status] | None = None,
) -> Verdict:
    """Run `checks` in `cwd` one after the other; the verdict. `register` hears each child's
    pid as it starts and `released` is called once it ended (a runner's supervisor);
    `interrupted` ends the command running and the rest are skipped."""
    failures: list[str] = []
    for item in checks:
        if report is not None:
            report("verification-started", {"command": item.command})
        outcome = run(
            item, cwd, timeout, interrupted=interrupted, register=register, env=env, sandbox=sandbox
        )
        if released is not None:
            released()
        if outcome.interrupted:
            return Verdict(tuple(failures), interrupted=True)  # the loop stops or pauses now
        if report is not None:
            data = {
                "command": item.command,
                "exit_code": outcome.exit_code,
                "duration_s": outcome.duration_s,
                "tail": outcome.tail,
            }
            report("verification-passed" if outcome.passed else "verification-failed", data)
        if not outcome.passed:
            failures.append(failure_of(outcome))
    return Verdict(tuple(failures))

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
from loop.verify.results import summed

Report = Callable[[str, dict[str, Any]], object]
"""Told each command's `verification-started`, then `-passed` or `-failed` with its outcome."""


@dataclass(frozen=True)
class Verdict:
    """What the checks said: every failure's command, exit status and output tail."""

    failures: tuple[str, ...] = ()
    interrupted: bool = False
    """A signal ended a command early: the commands after it did not run."""
    outcomes: tuple[Outcome, ...] = ()
    """Every command that ran to its end, in order (an interrupted one is not among them)."""

    @property
    def passed(self) -> bool:
        return not self.failures and not self.interrupted

    @property
    def failure(self) -> str | None:
        """The failures as one prompt for the agent, or None when none failed."""
        return "\n\n".join(self.failures) if self.failures else None

    def validation(self) -> dict[str, Any]:
        """The checks as data for the engine and the state's `last_validation`: each command's
        exit status, duration, kind and tests; the tests of all test commands summed; whether
        the test commands and the build commands passed (None when there was none of them)."""
        commands = [command_json(o) for o in self.outcomes]
        out: dict[str, Any] = {"commands": commands}
        tests = summed(o.tests for o in self.outcomes if o.kind == "tests")
        if tests is not None:
            out["tests"] = tests.to_json()
        for key, kind in (("tests_pass", "tests"), ("build_succeeds", "build")):
            ran = [o for o in self.outcomes if o.kind == kind]
            out[key] = all(o.passed for o in ran) if ran else None
        return out


def command_json(outcome: Outcome) -> dict[str, Any]:
    """One command's outcome as plain JSON (without its output)."""
    out: dict[str, Any] = {
        "command": outcome.command,
        "exit_code": outcome.exit_code,
        "duration_s": outcome.duration_s,
        "kind": outcome.kind,
    }
    if outcome.tests is not None:
        out["tests"] = outcome.tests.to_json()
    if outcome.errors is not None:
        out["errors"] = outcome.errors
    if outcome.warnings is not None:
        out["warnings"] = outcome.warnings
    return out


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
    outcomes: list[Outcome] = []
    for item in checks:
        if report is not None:
            report("verification-started", {"command": item.command})
        outcome = run(
            item, cwd, timeout, interrupted=interrupted, register=register, env=env, sandbox=sandbox
        )
        if released is not None:
            released()
        if outcome.interrupted:  # the loop stops or pauses now
            return Verdict(tuple(failures), interrupted=True, outcomes=tuple(outcomes))
        outcomes.append(outcome)
        if report is not None:
            data = {**command_json(outcome), "tail": outcome.tail}
            report("verification-passed" if outcome.passed else "verification-failed", data)
        if not outcome.passed:
            failures.append(failure_of(outcome))
    return Verdict(tuple(failures), outcomes=tuple(outcomes))

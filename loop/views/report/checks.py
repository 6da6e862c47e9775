"""The loop's verification: each command's runs and last result, and the tests still failing."""

from __future__ import annotations

from collections.abc import Mapping

from loop.core.model import JournalEvent
from loop.core.redact import redact
from loop.views.report.model import Check


def checks_in(events: list[JournalEvent]) -> list[Check]:
    checks: dict[str, Check] = {}
    for event in events:
        if event.kind not in ("verification-passed", "verification-failed"):
            continue
        command = redact(str(event.data.get("command") or "?"))
        check = checks.setdefault(command, Check(command))
        check.runs += 1
        check.last_passed = event.kind == "verification-passed"
        check.failed += 0 if check.last_passed else 1
        code = event.data.get("exit_code")
        check.last_exit = code if isinstance(code, int) and not isinstance(code, bool) else None
        check.last_iteration = event.iteration
        check.tail = redact(str(event.data.get("tail") or ""))
        tests = event.data.get("tests")
        check.tests = dict(tests) if isinstance(tests, Mapping) else None
    return list(checks.values())


def still_failing(events: list[JournalEvent]) -> list[str]:
    """The tests failing at the last judged turn, each with how long it has failed:
    `tests/test_a.py::test_x (failing since iteration 3)`."""
    runs: list[tuple[int | None, set[str]]] = []
    for event in events:
        if event.kind == "progress":
            tests = event.data.get("tests")
            if not isinstance(tests, Mapping):
                continue  # no test command ran this turn
            failing = tests.get("failing") or []  # left out when none fails
            if isinstance(failing, list):
                runs.append((event.iteration, {str(t) for t in failing}))
    if not runs:
        return []
    lines = []
    for test in sorted(runs[-1][1]):
        since = runs[-1][0]
        for iteration, failing in reversed(runs):
            if test not in failing:
                break
            since = iteration
        first = next(iteration for iteration, failing in runs if test in failing)
        note = "never passed; failing since iteration" if since == first else "failing again since iteration"
        lines.append(redact(f"{test} ({note} {since})"))
    return lines

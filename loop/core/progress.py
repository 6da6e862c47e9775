"""Progress judged on the tests: what a turn moved, the failure's kind, and the words for both.

The drivers hand the engine the verification results as data (`StopInput.validation`: the
checks' verdict, `git_clean`, `ts`) and what the turn changed in git (`Turn.files`). Here, and
nowhere else, they become a judgement: fewer tests failing, more passing, new tests, the same
failing tests with the same first error, and which kind of failure picks the next prompt. Pure:
plain maps in, plain maps and text out, so every driver's turn is judged the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loop.core.model import Aggregate

MOVES = ("tasks", "fewer-failing", "more-passing", "new-tests")
"""What a turn may move, in the order the `progress` event lists them."""

KINDS = ("build", "tests", "criteria", "checks", "git")
"""A failure's kind, most urgent first: a broken build hides the tests, a failing test hides
the rest; then a design's criterion whose command fails, another check that fails; a dirty
tree only matters once the checks pass."""

RECORD_KEYS = ("ts", "tests_pass", "build_succeeds", "git_clean")
FILE_KEYS = ("created", "modified", "deleted", "added", "removed")
"""What `Turn.files` counts: files created, modified, deleted; lines added, removed."""
SHOWN_FAILING = 10
"""How many failing tests a prompt or a status line names before it says how many more."""


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def tests_of(validation: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The summed test counts of a validation (or of a recorded `last_validation`), or None when
    no test command's output could be read."""
    if not isinstance(validation, Mapping):
        return None
    tests = validation.get("tests")
    return tests if isinstance(tests, Mapping) else None


def failing(tests: Mapping[str, Any]) -> int:
    """Tests that did not pass: failures and errors."""
    return _int(tests, "failed") + _int(tests, "errors")


def total(tests: Mapping[str, Any]) -> int:
    return _int(tests, "passed") + failing(tests) + _int(tests, "skipped")


def record(validation: Mapping[str, Any], before: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the state keeps of a validation (`LoopState.last_validation`): when, whether the
    tests pass, the build succeeds and the tree is clean, the summed test counts, whether each
    command passed (`passed`), and how many tests the first counted run had (`tests_at_start`,
    carried from `before`): the tests the loop added are counted from it."""
    kept: dict[str, Any] = {key: validation.get(key) for key in RECORD_KEYS}
    kept["ts"] = str(kept["ts"]) if kept["ts"] is not None else None
    for key in RECORD_KEYS[1:]:
        kept[key] = _flag(kept[key])
    tests = tests_of(validation)
    if tests is not None:
        kept["tests"] = dict(tests)
    commands = validation.get("commands")
    if isinstance(commands, list):  # which command passed: a design's criteria name them
        kept["passed"] = {
            str(c.get("command")): c.get("exit_code") == 0 for c in commands if isinstance(c, Mapping)
        }
    start = before.get("tests_at_start") if isinstance(before, Mapping) else None
    if isinstance(start, int) and not isinstance(start, bool):
        kept["tests_at_start"] = start
    elif tests is not None:
        kept["tests_at_start"] = total(tests)
    return kept


def tests_added(validation: Mapping[str, Any] | None) -> int | None:
    """How many tests the loop added since its first counted run, None when not known."""
    tests = tests_of(validation)
    start = validation.get("tests_at_start") if isinstance(validation, Mapping) else None
    if tests is None or not isinstance(start, int) or isinstance(start, bool):
        return None
    return max(0, total(tests) - start)


def ran(tests: Mapping[str, Any]) -> int:
    """Tests that ran: passed, failed or errored (a skipped test did not run)."""
    return _int(tests, "passed") + failing(tests)


def broken(tests: Mapping[str, Any]) -> bool:
    """A suite that could not run: errors and nothing passing (a collection error, a syntax
    error in a test file). Its counts say nothing about the tests, so it is never a move."""
    return _int(tests, "errors") > 0 and _int(tests, "passed") == 0


def test_moves(before: Mapping[str, Any] | None, now: Mapping[str, Any] | None) -> list[str]:
    """How the tests moved from the last validation to this one: fewer failing, more passing,
    new tests. [] when either has no test counts, or this run is a broken suite.

    Only a real improvement counts, so that breaking, deleting or skipping tests never looks
    like progress: fewer failing only when no passing test was lost and no test stopped running
    (a failing test deleted or skipped is not one fixed); new tests only when they pass too."""
    was, tests = tests_of(before), tests_of(now)
    if was is None or tests is None or broken(tests):
        return []
    moved = []
    more_passing = _int(tests, "passed") > _int(was, "passed")
    if (
        failing(tests) < failing(was)
        and _int(tests, "passed") >= _int(was, "passed")
        and ran(tests) >= ran(was)
    ):
        moved.append("fewer-failing")
    if more_passing:
        moved.append("more-passing")
    if total(tests) > total(was) and more_passing:
        moved.append("new-tests")
    return moved


def judged_on_tests(before: Mapping[str, Any] | None, now: Mapping[str, Any] | None) -> bool:
    """Is this turn's progress judged on the tests alone (with the tasks)? When both it and the
    last validation have test counts and some test still fails: the workspace changing is then
    no progress by itself. A green suite cannot get greener, so there the workspace still
    counts; with no counts known, it counts as it always did."""
    was, tests = tests_of(before), tests_of(now)
    return was is not None and tests is not None and failing(tests) > 0


def error_signature(validation: Mapping[str, Any] | None) -> str | None:
    """The failing tests and their normalised first error, compared across turns to find the
    same failure repeating; None when no test fails or none could be read."""
    tests = tests_of(validation)
    if tests is None or not failing(tests):
        return None
    names = tests.get("failing")
    listed = ",".join(str(n) for n in names) if isinstance(names, list | tuple) else ""
    return f"failing: {listed} | first error: {tests.get('first_error') or ''}"


def failed_commands(validation: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The commands that failed and are neither tests nor a build: the checks (a design's
    criterion, `test -f out.txt`, a script), which the tests' and the build's verdicts leave out."""
    commands = validation.get("commands") if isinstance(validation, Mapping) else None
    if not isinstance(commands, list | tuple):
        return []
    return [
        c
        for c in commands
        if isinstance(c, Mapping)
        and c.get("exit_code") not in (0, None)
        and c.get("kind") not in ("tests", "build")
    ]


def failure_kind(
    validation: Mapping[str, Any] | None, criteria: Mapping[str, str] | None = None
) -> str | None:
    """What kind of failure the checks show, most urgent first (`KINDS`), or None when they
    show none: the build, the tests, a criterion's command (`criteria`: each command a design's
    criterion names, with its words), another check, a dirty tree."""
    if not isinstance(validation, Mapping):
        return None
    if validation.get("build_succeeds") is False:
        return "build"
    if validation.get("tests_pass") is False:
        return "tests"
    failed = failed_commands(validation)
    if any(str(c.get("command")) in (criteria or {}) for c in failed):
        return "criteria"
    if failed:
        return "checks"
    if validation.get("git_clean") is False:
        return "git"
    return None


def tests_line(tests: Mapping[str, Any]) -> str:
    """`7 passed, 3 failed, 1 error, 2 skipped` (zeros left out, but never an empty line)."""
    parts = [f"{_int(tests, 'passed')} passed"]
    if _int(tests, "failed"):
        parts.append(f"{_int(tests, 'failed')} failed")
    if _int(tests, "errors"):
        n = _int(tests, "errors")
        parts.append(f"{n} error{'s' if n != 1 else ''}")
    if _int(tests, "skipped"):
        parts.append(f"{_int(tests, 'skipped')} skipped")
    coverage = tests.get("coverage")
    if isinstance(coverage, int | float) and not isinstance(coverage, bool):
        parts.append(f"coverage {coverage:g}%")
    return ", ".join(parts)


def failing_names(tests: Mapping[str, Any], shown: int = SHOWN_FAILING) -> str:
    """The failing tests' names, the first `shown`, then how many more."""
    names = tests.get("failing")
    if not isinstance(names, list | tuple) or not names:
        return ""
    listed = ", ".join(str(n) for n in names[:shown])
    more = failing(tests) - min(shown, len(names))
    return listed + (f" and {more} more" if more > 0 else "")


def validation_lines(
    validation: Mapping[str, Any] | None, criteria: Mapping[str, str] | None = None
) -> list[str]:
    """The checks' results as the agent reads them: the test counts, the failing tests, the
    first error, the build, each other check that failed (by the criterion that names it, when
    `criteria` has it), the working tree."""
    if not isinstance(validation, Mapping):
        return []
    lines = []
    tests = tests_of(validation)
    if tests is not None:
        lines.append(f"Tests: {tests_line(tests)}")
        names = failing_names(tests)
        if names:
            lines.append(f"Failing: {names}")
        if tests.get("first_error"):
            lines.append(f"First error: {str(tests['first_error'])[:500]}")
    elif validation.get("tests_pass") is not None:
        lines.append(f"Tests: {'pass' if validation['tests_pass'] else 'fail'}")
    if validation.get("build_succeeds") is not None:
        lines.append(f"Build: {'succeeds' if validation['build_succeeds'] else 'fails'}")
    for command in failed_commands(validation)[:SHOWN_FAILING]:
        name, code = str(command.get("command")), command.get("exit_code")
        said = (criteria or {}).get(name)
        if said is not None:
            lines.append(f"Criterion not met: {said} (`{name}` exited {code})")
        else:
            lines.append(f"Check failed: `{name}` (exit {code})")
    if validation.get("git_clean") is False:
        lines.append("Working tree: uncommitted changes")
    return lines


NEXT_STEP = {
    "build": "Fix the build errors first: nothing else can be checked while the build fails.",
    "tests": "Fix the failing tests (the code, not the tests' expectations), starting with the first error.",
    "criteria": "Make the design's failing criteria hold: fix the code until each criterion's command passes "
    "(the cause, not the command).",
    "checks": "Fix what the failing checks report (the cause, not the check).",
    "git": "Commit your changes: the working tree has uncommitted work.",
}
"""The next action, by the kind of failure."""


def task_counts(sources: Aggregate) -> dict[str, int]:
    """Open and done tasks across the readable sources."""
    readable = [r for r in sources.sources if r.enabled and r.available]
    return {"open": sources.pending_total, "done": sum(r.done for r in readable)}


def event(
    sources: Aggregate | None,
    validation: Mapping[str, Any] | None,
    files: Mapping[str, Any] | None,
    moved: list[str],
) -> dict[str, Any]:
    """The `progress` event of one judged turn."""
    data: dict[str, Any] = {"tasks": task_counts(sources) if sources is not None else None}
    tests = tests_of(validation)
    if tests is not None:
        data["tests"] = dict(tests)
    for key in ("tests_pass", "build_succeeds", "git_clean"):
        data[key] = _flag(validation.get(key)) if isinstance(validation, Mapping) else None
    if files is not None:
        data["files"] = dict(files)
    data["moved"] = [m for m in MOVES if m in moved]
    return data


def combined(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several validations (one per command, as the Stop hook runs them) as one: the commands
    in order, the test counts summed, each verdict false when any part's is, None when none says."""
    commands: list[Any] = []
    tests: dict[str, Any] = {}
    names: set[str] = set()
    verdicts: dict[str, bool | None] = {"tests_pass": None, "build_succeeds": None}
    for part in parts:
        listed = part.get("commands")
        if isinstance(listed, list | tuple):
            commands.extend(listed)
        for key in verdicts:
            said = _flag(part.get(key))
            if said is not None:
                verdicts[key] = said if verdicts[key] is None else bool(verdicts[key] and said)
        counts = tests_of(part)
        if counts is None:
            continue
        for key in ("passed", "failed", "errors", "skipped"):
            tests[key] = tests.get(key, 0) + _int(counts, key)
        failing_now = counts.get("failing")
        if isinstance(failing_now, list | tuple):
            names.update(str(n) for n in failing_now)
        for key in ("first_error", "coverage", "reader"):
            if key not in tests and counts.get(key) is not None:
                tests[key] = counts[key]
        if isinstance(counts.get("duration_s"), int | float):
            tests["duration_s"] = round(float(tests.get("duration_s", 0.0)) + float(counts["duration_s"]), 3)
    data: dict[str, Any] = {"commands": commands, **verdicts}
    if tests:
        if names:
            tests["failing"] = sorted(names)[:50]
        data["tests"] = tests
    return data

"""What a verification command's output says about the tests: counts, the failing tests' names,
the first failure's error line, duration and coverage, as data the engine can compare from one
turn to the next ("fewer tests fail", "the same error again").

Machine output is read first where the tool has one: pytest's JUnit XML (`junit`), `go test
-json` (`gotest`), node's test runner (`node`), cargo's libtest summary (`cargo`), unittest's
summary (`unittest`); otherwise the closing summary lines (`pytest`, and jest's and vitest's
`Tests` line in `jest`). Output none of them reads gives None: the command counts by its exit
status. Build and lint commands (tsc, mypy, ruff, cargo, eslint, pyright) give error and
warning counts (`build`). A command that is neither (`test -f out.txt`, a script) is a check:
it says nothing about the build.

Every reader takes untrusted text (the agent wrote the code that printed it): none raises, none
follows a symlink or a DTD, and what it returns is redacted and bounded (`normal`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from loop.verify.results.build import build_counts
from loop.verify.results.cargo import read_cargo
from loop.verify.results.counts import TestCounts, summed
from loop.verify.results.coverage import coverage_of
from loop.verify.results.gotest import read_go_json
from loop.verify.results.jest import read_jest, read_vitest
from loop.verify.results.junit import junit_argv, read_junit, read_report
from loop.verify.results.node import read_node
from loop.verify.results.normal import ANSI, normalise
from loop.verify.results.pytest import read_pytest
from loop.verify.results.runners import is_build_tool, is_test_runner, words_of
from loop.verify.results.unittest import read_unittest

__all__ = [
    "MAX_OUTPUT",
    "READERS",
    "Examined",
    "TestCounts",
    "build_counts",
    "coverage_of",
    "examine",
    "is_build_tool",
    "is_test_runner",
    "junit_argv",
    "kind_of",
    "normalise",
    "read",
    "read_cargo",
    "read_go_json",
    "read_jest",
    "read_junit",
    "read_node",
    "read_pytest",
    "read_report",
    "read_unittest",
    "read_vitest",
    "summed",
    "words_of",
]

MAX_OUTPUT = 2 * 1024 * 1024
"""The last bytes of a command's output that are read (its summary is at the end)."""

READERS: tuple[tuple[tuple[str, ...], Callable[[str], TestCounts | None]], ...] = (
    (('"Action"',), read_go_json),
    (("test result: ",), read_cargo),
    ((" tests in ", " test in "), read_unittest),
    (("# pass ", "ℹ pass "), read_node),
    (("Tests:",), read_jest),
    (("Tests  ",), read_vitest),
    ((" passed", " failed", " error", " skipped", "no tests ran"), read_pytest),
)
"""Text readers, most specific first, each behind a cheap test that its output is there."""


def read(text: str) -> TestCounts | None:
    """The test counts the text says, from the first reader that reads it; None when none
    does. Never raises."""
    return _read(_plain(text))


def _plain(output: str) -> str:
    """The end of a command's output that the readers look at, without its colours."""
    return ANSI.sub("", output[-MAX_OUTPUT:])


def _read(text: str) -> TestCounts | None:
    for needles, reader in READERS:
        if not any(needle in text for needle in needles):
            continue
        try:
            counts = reader(text)
        except Exception:  # odd output must never stop the loop
            counts = None
        if counts is not None:
            return counts
    return None


@dataclass(frozen=True, slots=True)
class Examined:
    """What a command's output says: its kind ("tests", "build" or "check"), its tests, its
    build errors and warnings."""

    kind: str
    tests: TestCounts | None = None
    errors: int | None = None
    warnings: int | None = None


def kind_of(command: str, argv: Sequence[str] | None) -> str:
    """A command's kind from its words alone: "tests" for a test runner, "build" for a build or
    lint tool, else "check" (`test -f out.txt`, a script: neither tests nor the build)."""
    words = words_of(command, argv)
    if is_test_runner(words):
        return "tests"
    return "build" if is_build_tool(words) else "check"


def examine(
    command: str,
    argv: Sequence[str] | None,
    output: str,
    *,
    junit: bytes | None = None,
    root: Path | None = None,
) -> Examined:
    """Read one command's output (and its JUnit report when loopdeck asked for one): "tests"
    when a test reader read it or its program runs tests; "build" with its error and warning
    counts when its program builds or lints, or its output reads as a build tool's; else
    "check". Never raises: odd output is a command whose tests could not be read."""
    try:
        text = _plain(output)
        tests = read_junit(junit, root) if junit else None
        if tests is None:
            tests = _read(text)
        if tests is not None:
            coverage = coverage_of(text)
            if coverage is not None:
                tests = replace(tests, coverage=coverage)
            return Examined("tests", tests)
        kind = kind_of(command, argv)
        if kind == "tests":
            return Examined("tests")
        errors, warnings = build_counts(text)
        if kind == "build" or errors is not None or warnings is not None:
            return Examined("build", None, errors, warnings)
        return Examined("check")
    except Exception:  # odd output must never stop the loop
        return Examined(_safe_kind(command, argv))


def _safe_kind(command: str, argv: Sequence[str] | None) -> str:
    try:
        return kind_of(command, argv)
    except Exception:
        return "check"

"""pytest's closing lines, when no JUnit report was read: `=== 3 failed, 7 passed in 0.12s ===`
(or `-q`'s bare one) and the short summary's `FAILED tests/x.py::test_a - …` lines."""

from __future__ import annotations

import re

from loop.verify.results.counts import TestCounts
from loop.verify.results.normal import first, names
from loop.verify.results.scan import grep, number, whole

_PYTEST_WORDS = {
    "passed": "passed",
    "failed": "failed",
    "error": "errors",
    "errors": "errors",
    "skipped": "skipped",
    "xfailed": "skipped",
    "xpassed": "passed",
    "deselected": "",
    "warning": "",
    "warnings": "",
    "rerun": "",
    "subtests passed": "",
}
_PYTEST_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ [a-z ]+?)(?:, \d+ [a-z ]+?)*|no tests ran) in (\d+(?:\.\d+)?)s(?: \([^)]*\))?\s*=*\s*$",
    re.M,
)
_PYTEST_SHORT = re.compile(r"^(FAILED|ERROR) (.+?)(?: - (.*))?$", re.M)
_PYTEST_E = re.compile(r"^E\s+(.+)$", re.M)


def read_pytest(text: str) -> TestCounts | None:
    """pytest's closing line (`=== 3 failed, 7 passed in 0.12s ===`, or `-q`'s bare one) and
    its short summary (`FAILED tests/x.py::test_a - AssertionError: …`)."""
    summary: dict[str, int] | None = None
    seconds = None
    for match in _PYTEST_SUMMARY.finditer(text[-65536:]):  # its closing line
        counts = _pytest_counts(match.group(1))
        if counts is not None:
            summary, seconds = counts, match.group(2)
    if summary is None:
        return None
    failing: list[str] = []
    errors: list[str | None] = []
    short = "\n".join(grep(text, "FAILED ") + grep(text, "ERROR "))
    for kind, name, message in _PYTEST_SHORT.findall(short):
        if kind == "ERROR" and not name.strip():
            continue
        failing.append(name)
        errors.append(message or None)
    if not any(errors):
        e_line = _PYTEST_E.search("\n".join(grep(text, "E ", 1)))
        errors.append(e_line.group(1) if e_line else None)
    return TestCounts(
        passed=summary.get("passed", 0),
        failed=summary.get("failed", 0),
        errors=summary.get("errors", 0),
        skipped=summary.get("skipped", 0),
        failing=names(failing),
        first_error=first(errors),
        duration_s=number(seconds),
        reader="pytest",
    )


def _pytest_counts(text: str) -> dict[str, int] | None:
    if text == "no tests ran":
        return {}
    out: dict[str, int] = {}
    for part in text.split(", "):
        count, _, word = part.partition(" ")
        if word not in _PYTEST_WORDS:
            return None
        key = _PYTEST_WORDS[word]
        if key:
            out[key] = out.get(key, 0) + whole(count)
    return out

"""jest's and vitest's closing `Tests` line and their failing tests' headers."""

from __future__ import annotations

import re

from loop.verify.results.counts import TestCounts
from loop.verify.results.normal import names
from loop.verify.results.scan import grep, last, whole

_JEST_TESTS = re.compile(r"^Tests:\s+((?:\d+ \w+, )*)(\d+) total\s*$", re.M)
_JEST_FAILED = re.compile(r"^\s*● (.+ › .+|[^●\n]+?)\s*$", re.M)
_VITEST_TESTS = re.compile(r"^\s*Tests\s+((?:\d+ \w+ ?\|? ?)+)\((\d+)\)\s*$", re.M)
_VITEST_FAILED = re.compile(r"^\s*(?:FAIL|×|✗)\s+(\S+ > .+?)(?: \d+m?s)?\s*$", re.M)


def read_jest(text: str) -> TestCounts | None:
    """jest's `Tests: 1 failed, 4 passed, 5 total` and its `● Suite › test` headers."""
    match = last(_JEST_TESTS, "\n".join(grep(text, "Tests:")))
    if match is None:
        return None
    heads = "\n".join(ln for ln in text.splitlines() if "●" in ln)
    failing = [n for n in _JEST_FAILED.findall(heads) if not n.startswith("Console")]
    return _counts(match.group(1), failing, "jest")


def read_vitest(text: str) -> TestCounts | None:
    """vitest's `Tests  1 failed | 4 passed (5)` and its `FAIL  file > suite > test` lines."""
    match = last(_VITEST_TESTS, "\n".join(ln for ln in text[-65536:].splitlines() if "Tests " in ln))
    if match is None:
        return None
    failing = _VITEST_FAILED.findall("\n".join(ln for ln in text.splitlines() if " > " in ln))
    return _counts(match.group(1), failing, "vitest")


def _counts(said: str, failing: list[str], reader: str) -> TestCounts:
    """The counts of a `1 failed, 4 passed` (or `|`-separated) list; todo counts as skipped."""
    by_word = {word: whole(n) for n, word in re.findall(r"(\d+) (\w+)", said)}
    return TestCounts(
        passed=by_word.get("passed", 0),
        failed=by_word.get("failed", 0),
        skipped=by_word.get("skipped", 0) + by_word.get("todo", 0),
        failing=names(failing),
        reader=reader,
    )

"""`TestCounts`: what one test command's runner said, and several commands' counts as one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loop.verify.results.normal import names


@dataclass(frozen=True, slots=True)
class TestCounts:
    """What one test command's runner said, when its output could be read."""

    __test__ = False  # not a pytest test class, whatever its name

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failing: tuple[str, ...] = ()
    """The failing tests' ids, at most `MAX_FAILING`, sorted."""
    first_error: str | None = None
    """The first failure's error line, normalised (`normalise`): the same failure twice gives
    the same line."""
    duration_s: float | None = None
    coverage: float | None = None
    """Percent, when the command reports it."""
    reader: str = ""
    """Which output was read: junit, go-json, node, cargo, unittest, pytest, jest, vitest."""

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: the four counts always, the optional keys only when they say something."""
        out: dict[str, Any] = {
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "skipped": self.skipped,
        }
        if self.failing:
            out["failing"] = list(self.failing)
        if self.first_error is not None:
            out["first_error"] = self.first_error
        if self.duration_s is not None:
            out["duration_s"] = self.duration_s
        if self.coverage is not None:
            out["coverage"] = self.coverage
        if self.reader:
            out["reader"] = self.reader
        return out

    @classmethod
    def from_json(cls, data: object) -> TestCounts | None:
        """Counts read back from a journal or a state file; None when `data` is not a mapping.
        A field of the wrong type takes its default."""
        if not isinstance(data, Mapping):
            return None

        def count(key: str) -> int:
            value = data.get(key)
            return max(0, value) if isinstance(value, int) and not isinstance(value, bool) else 0

        def number(key: str) -> float | None:
            value = data.get(key)
            if not isinstance(value, int | float) or isinstance(value, bool):
                return None
            return float(value) if value == value else None  # NaN is not a number here

        failing = data.get("failing")
        first = data.get("first_error")
        reader = data.get("reader")
        return cls(
            passed=count("passed"),
            failed=count("failed"),
            errors=count("errors"),
            skipped=count("skipped"),
            failing=names(n for n in failing if isinstance(n, str)) if isinstance(failing, list) else (),
            first_error=first if isinstance(first, str) else None,
            duration_s=number("duration_s"),
            coverage=number("coverage"),
            reader=reader if isinstance(reader, str) else "",
        )


def summed(counts: Iterable[TestCounts | None]) -> TestCounts | None:
    """Several test commands' counts as one (None when none was read): counts and durations
    added, the failing names merged, the first error and coverage the first known."""
    known = [c for c in counts if c is not None]
    if not known:
        return None
    if len(known) == 1:
        return known[0]
    durations = [c.duration_s for c in known if c.duration_s is not None]
    return TestCounts(
        passed=sum(c.passed for c in known),
        failed=sum(c.failed for c in known),
        errors=sum(c.errors for c in known),
        skipped=sum(c.skipped for c in known),
        failing=names(n for c in known for n in c.failing),
        first_error=next((c.first_error for c in known if c.first_error is not None), None),
        duration_s=round(sum(durations), 3) if durations else None,
        coverage=next((c.coverage for c in known if c.coverage is not None), None),
        reader="+".join(dict.fromkeys(c.reader for c in known if c.reader)),
    )

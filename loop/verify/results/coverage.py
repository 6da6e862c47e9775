"""The total coverage a test command printed: coverage.py and pytest-cov, istanbul (jest, c8,
nyc), `go test -cover`."""

from __future__ import annotations

import re

from loop.verify.results.scan import grep, number

_COVERAGE = (
    ("TOTAL", re.compile(r"^TOTAL\s+(?:\S+\s+)*?(\d+(?:\.\d+)?)%\s*$", re.M)),  # coverage.py, pytest-cov
    ("All files", re.compile(r"^All files\s*\|\s*(\d+(?:\.\d+)?)\s*\|", re.M)),  # istanbul (jest, c8, nyc)
    ("", re.compile(r"coverage: (\d+(?:\.\d+)?)% of statements")),  # go test -cover
)


def coverage_of(text: str) -> float | None:
    """The total coverage the output reports, in percent (go's packages averaged), or None."""
    for prefix, pattern in _COVERAGE:
        said = "\n".join(grep(text, prefix)) if prefix else (text if "% of statements" in text else "")
        found = [v for v in (number(m) for m in pattern.findall(said)) if v is not None and 0 <= v <= 100]
        if found:
            return round(found[-1] if len(found) == 1 else sum(found) / len(found), 2)
    return None

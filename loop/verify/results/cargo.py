"""cargo test's libtest summary: one `test result:` line per test binary, added up."""

from __future__ import annotations

import re

from loop.verify.results.counts import TestCounts
from loop.verify.results.normal import first, names
from loop.verify.results.scan import grep, number, whole

_CARGO_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured;"
    r"(?: \d+ filtered out;?)?(?: finished in (\d+(?:\.\d+)?)s)?",
    re.M,
)
_CARGO_FAILED = re.compile(r"^test (\S+)(?: - should panic)? \.\.\. FAILED\s*$", re.M)
_CARGO_STDOUT = re.compile(r"^---- (\S+) stdout ----\s*$", re.M)


def read_cargo(text: str) -> TestCounts | None:
    """libtest's `test result:` lines (one per test binary, added up), the failing tests from
    `test x ... FAILED` and `---- x stdout ----`, the first one's panic message."""
    results = _CARGO_RESULT.findall("\n".join(grep(text, "test result: ")))
    if not results:
        return None
    durations = [number(r[3]) for r in results if r[3]]
    failed = "\n".join(ln for ln in grep(text, "test ") if ln.endswith("FAILED"))
    failing = _CARGO_FAILED.findall(failed) + _CARGO_STDOUT.findall("\n".join(grep(text, "---- ")))
    stdout = _CARGO_STDOUT.search(text) if failing else None
    error = _panic(text[stdout.end() : stdout.end() + 4000]) if stdout else None
    known = [d for d in durations if d is not None]
    return TestCounts(
        passed=sum(whole(r[0]) for r in results),
        failed=sum(whole(r[1]) for r in results),
        skipped=sum(whole(r[2]) for r in results),
        failing=names(failing),
        first_error=first([error]),
        duration_s=round(sum(known), 3) if known else None,
        reader="cargo",
    )


def _panic(block: str) -> str | None:
    lines = block.splitlines()
    for i, line in enumerate(lines):
        old = re.match(r"thread '.*?' panicked at '(.*)', \S+$", line)
        if old:
            return old.group(1)
        if re.match(r"thread '.*?' panicked at ", line):
            rest = line.split(" panicked at ", 1)[1].rstrip(":")
            after = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return after or rest
    return next((ln for ln in lines if ln.strip()), None)

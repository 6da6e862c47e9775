"""Python's unittest: `Ran N tests in Xs`, the closing `OK`/`FAILED (…)` and each failure's
traceback."""

from __future__ import annotations

import re

from loop.verify.results.counts import TestCounts
from loop.verify.results.normal import first, names
from loop.verify.results.scan import grep, last, number, whole

_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in (\d+(?:\.\d+)?)s\s*$", re.M)
_UNITTEST_END = re.compile(r"^(OK|FAILED|NO TESTS RAN)(?: \(([^)]*)\))?\s*$", re.M)
_UNITTEST_HEADS = ("FAIL: ", "ERROR: ", "UNEXPECTED SUCCESS: ")
_UNITTEST_HEAD = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)]*)\)")


def read_unittest(text: str) -> TestCounts | None:
    """unittest's `Ran N tests in Xs` and `FAILED (failures=2, errors=1, skipped=1)`, the
    failing tests from their `FAIL: test_x (mod.Class.test_x)` headers."""
    said_ran = last(_UNITTEST_RAN, "\n".join(grep(text, "Ran ")))
    if said_ran is None:
        return None
    at = text.rfind(said_ran.group(0))
    ran = _UNITTEST_RAN.match(text, at)
    end = _UNITTEST_END.search(text, ran.end()) if ran is not None else None
    if ran is None or end is None:
        return None
    said = dict.fromkeys(("failures", "errors", "skipped", "expected failures", "unexpected successes"), 0)
    for part in (end.group(2) or "").split(","):
        key, _, value = part.strip().partition("=")
        if key in said:
            said[key] = whole(value)
    total = whole(ran.group(1))
    failed = said["failures"] + said["unexpected successes"]
    skipped = said["skipped"] + said["expected failures"]
    failing: list[str] = []
    errors: list[str | None] = []
    lines = text[: ran.start()].splitlines()
    for i, line in enumerate(lines):
        head = _UNITTEST_HEAD.match(line) if line.startswith(_UNITTEST_HEADS) else None
        if head is None:
            continue
        method, where = head.group(2), head.group(3)
        failing.append(where if where.rsplit(".", 1)[-1] == method else f"{where}.{method}")
        errors.append(_traceback_error(lines[i + 1 : i + 400]))
    return TestCounts(
        passed=max(0, total - failed - said["errors"] - skipped),
        failed=failed,
        errors=said["errors"],
        skipped=skipped,
        failing=names(failing),
        first_error=first(errors),
        duration_s=number(ran.group(2)),
        reader="unittest",
    )


def _traceback_error(block: list[str]) -> str | None:
    """The exception line of the traceback in `block` (up to the next `===`/`---` rule)."""
    body: list[str] = []
    for line in block:
        if line.startswith(("=====", "-----")) and body:
            break
        if not line.startswith(("=====", "-----")):
            body.append(line)
    last_file = max((i for i, ln in enumerate(body) if ln.startswith('  File "')), default=-1)
    for line in body[last_file + 1 :]:
        if line.strip() and not line.startswith((" ", "\t", "Traceback")):
            return line
    return None

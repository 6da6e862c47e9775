"""node's own test runner (`node --test`): its TAP output or its spec reporter's summary."""

from __future__ import annotations

import re

from loop.verify.results.counts import TestCounts
from loop.verify.results.normal import first, names
from loop.verify.results.scan import grep, number, whole

_NODE_SUMMARY = re.compile(
    r"^(?:# |ℹ )(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)\s*$", re.M
)
_TAP_NOT_OK = re.compile(r"^(\s*)not ok \d+ - (.*?)(?: # (?:SKIP|TODO)\b.*)?$")
_SPEC_FAILED = re.compile(r"^\s*✖ (.*?)(?: \(\d+(?:\.\d+)?m?s\))?\s*$")


def read_node(text: str) -> TestCounts | None:
    """node's test runner: the summary (`# pass 3` in TAP, `ℹ pass 3` in the spec reporter),
    the failing tests from TAP's `not ok` lines or the spec reporter's `failing tests` list."""
    summary = "\n".join(grep(text, "# ") + grep(text, "ℹ "))
    found = {name: value for name, value in _NODE_SUMMARY.findall(summary)}
    if "pass" not in found or "fail" not in found:
        return None
    lines = text.splitlines()
    marker = next((i for i, ln in enumerate(lines) if ln.strip() == "✖ failing tests:"), None)
    if marker is not None:
        failing, errors = _spec_failures(lines[marker + 1 :])
    else:
        failing, errors = _tap_failures(lines)
    duration = number(found.get("duration_ms"))
    return TestCounts(
        passed=whole(found.get("pass")),
        failed=whole(found.get("fail")),
        errors=whole(found.get("cancelled")),
        skipped=whole(found.get("skipped")) + whole(found.get("todo")),
        failing=names(failing),
        first_error=first(errors),
        duration_s=round(duration / 1000, 3) if duration is not None else None,
        reader="node",
    )


def _tap_failures(lines: list[str]) -> tuple[list[str], list[str | None]]:
    failing: list[str] = []
    errors: list[str | None] = []
    for i, line in enumerate(lines):
        match = _TAP_NOT_OK.match(line) if "not ok " in line else None
        if match is None:
            continue
        block = _yaml_block(lines, i + 1)
        if any("subtestsFailed" in b for b in block):
            continue  # a suite or file whose tests failed: they are listed themselves
        failing.append(match.group(2))
        errors.append(_yaml_error(block))
    return failing, errors


def _yaml_block(lines: list[str], start: int) -> list[str]:
    """The YAML diagnostics after a TAP line (`---` … `...`), at most 200 lines."""
    if start >= len(lines) or lines[start].strip() != "---":
        return []
    block = []
    for line in lines[start + 1 : start + 200]:
        if line.strip() == "...":
            break
        block.append(line)
    return block


def _yaml_error(block: list[str]) -> str | None:
    for i, line in enumerate(block):
        key, _, value = line.strip().partition(":")
        if key != "error":
            continue
        value = value.strip()
        if value in ("|-", "|", ">-", ">", "|+"):
            follow = next((b.strip() for b in block[i + 1 :] if b.strip()), "")
            return follow or None
        return value.strip("'\"") or None
    return None


def _spec_failures(lines: list[str]) -> tuple[list[str], list[str | None]]:
    failing: list[str] = []
    errors: list[str | None] = []
    for i, line in enumerate(lines):
        match = _SPEC_FAILED.match(line) if "✖" in line else None
        if match is None:
            continue
        after = next((ln.strip() for ln in lines[i + 1 : i + 20] if ln.strip()), "")
        if re.fullmatch(r"'\d+ subtests? failed'", after):
            continue
        failing.append(match.group(1))
        errors.append(after or None)
    return failing, errors

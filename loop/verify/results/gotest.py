"""`go test -json`'s events read into counts."""

from __future__ import annotations

import json
import re

from loop.verify.results.counts import TestCounts
from loop.verify.results.normal import first, names


def read_go_json(text: str) -> TestCounts | None:
    """`go test -json`'s events: each test's last action, leaves only (a test whose subtests
    ran is counted by them); a package that failed with no failing test (it did not build) is
    an error."""
    if '"Action"' not in text:
        return None
    final: dict[tuple[str, str], str] = {}
    output: dict[tuple[str, str], list[str]] = {}
    packages: dict[str, str] = {}
    elapsed = 0.0
    timed = False
    seen = False
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{") or '"Action"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or not isinstance(event.get("Action"), str):
            continue
        seen = True
        action, package, test = event["Action"], str(event.get("Package") or ""), event.get("Test")
        key = (package, str(test) if isinstance(test, str) else "")
        if action in ("output", "build-output"):
            said = event.get("Output")
            if isinstance(said, str) and len(output.setdefault(key, [])) < 50:
                output[key].append(said)
        elif action in ("pass", "fail", "skip"):
            if key[1]:
                final[key] = action
            else:
                packages[package] = action
                number = event.get("Elapsed")
                if isinstance(number, int | float) and not isinstance(number, bool):
                    elapsed, timed = elapsed + float(number), True
    if not seen:
        return None
    parents = {(p, t.rsplit("/", 1)[0]) for p, t in final if "/" in t}
    leaves = {k: v for k, v in final.items() if k not in parents}
    failing = sorted(k for k, v in leaves.items() if v == "fail")
    broken = sorted(p for p, v in packages.items() if v == "fail" and not any(k[0] == p for k in failing))
    firsts = [_go_error(output.get(k, [])) for k in failing]
    firsts += [_go_error(output.get((p, ""), [])) for p in broken]
    return TestCounts(
        passed=sum(v == "pass" for v in leaves.values()),
        failed=len(failing),
        errors=len(broken),
        skipped=sum(v == "skip" for v in leaves.values()),
        failing=names([f"{p}.{t}" for p, t in failing] + broken),
        first_error=first(firsts),
        duration_s=round(elapsed, 3) if timed else None,
        reader="go-json",
    )


_GO_NOISE = re.compile(
    r"^\s*(?:=== (?:RUN|PAUSE|CONT|NAME)|--- (?:FAIL|PASS|SKIP)|FAIL\b|ok\b|PASS$|exit status)"
)


def _go_error(lines: list[str]) -> str | None:
    for line in "".join(lines).splitlines():
        if line.strip() and not _GO_NOISE.match(line) and not line.startswith("# "):
            return line.strip()
    return None

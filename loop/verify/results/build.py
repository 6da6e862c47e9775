"""Error and warning counts from build and lint commands: tsc, mypy, ruff, cargo, eslint,
pyright."""

from __future__ import annotations

import re

from loop.verify.results.scan import grep, whole

_FOUND = re.compile(r"^Found (\d+) errors?\b", re.M)  # tsc, mypy, ruff
_ESLINT = re.compile(r"✖ \d+ problems? \((\d+) errors?, (\d+) warnings?\)")
_PYRIGHT = re.compile(r"^(\d+) errors?, (\d+) warnings?, \d+ (?:informations?|notes?)\s*$", re.M)
_CLEAN = ("Success: no issues found", "All checks passed!")
_RUST_WARNING = re.compile(r"^warning: (?!.*\bgenerated \d+ warnings?\b)(?!unused manifest key)", re.M)
_RUST_ERROR = re.compile(r"^error(?:\[E\d+\])?: (?!could not compile)(?!aborting due to)", re.M)
_TSC_ERROR = re.compile(r": error TS\d+:", re.M)


def build_counts(text: str) -> tuple[int | None, int | None]:
    """Errors and warnings a build or lint command reported, each None when it did not say."""
    for match in _ESLINT.finditer(text if " problem" in text else ""):
        return whole(match.group(1)), whole(match.group(2))
    for match in _PYRIGHT.finditer(text if " information" in text or " note" in text else ""):
        return whole(match.group(1)), whole(match.group(2))
    found = _FOUND.findall("\n".join(grep(text, "Found ")))
    if found:
        return whole(found[-1]), None
    rust_errors = len(_RUST_ERROR.findall("\n".join(grep(text, "error"))))
    rust_warnings = len(_RUST_WARNING.findall("\n".join(grep(text, "warning: "))))
    if rust_errors or rust_warnings:
        return rust_errors, rust_warnings
    tsc = text.count("error TS") and len(_TSC_ERROR.findall(text))
    if tsc:
        return tsc, None
    if any(grep(text, clean, 1) for clean in _CLEAN):
        return 0, None
    return None, None

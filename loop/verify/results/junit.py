"""pytest's JUnit XML report: asking for one (`junit_argv`), reading its file safely
(`read_report`) and its counts (`read_junit`).

loopdeck adds `--junitxml` itself, to a private folder outside the workspace; the file is
still written by code the agent controls, so no symlink is followed and no DTD is parsed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loop.verify.results.counts import TestCounts
from loop.verify.results.normal import first, names
from loop.verify.results.scan import number

if TYPE_CHECKING:
    from xml.etree import ElementTree

MAX_XML = 16 * 1024 * 1024


def junit_argv(argv: Sequence[str], report: str) -> list[str] | None:
    """`argv` with `--junitxml=<report>` added where pytest reads its options (right after
    `pytest` or `python -m pytest`, before any `--`); None when it is not pytest or the person
    already asked for a report (or turned the plugin off)."""
    from loop.verify.options import program

    if not argv:
        return None
    name, args = program(argv)
    if os.path.basename(name) not in ("pytest", "py.test"):
        return None
    for i, word in enumerate(args):
        if word == "--":
            break
        turned_off = word == "-p" and "no:junitxml" in args[i + 1 : i + 2]
        if word.startswith("--junit") or "no:junitxml" in word or turned_off:
            return None
    at = len(argv) - len(args)
    return [*argv[:at], f"--junitxml={report}", *argv[at:]]


def read_report(path: Path) -> bytes | None:
    """The JUnit report at `path`, not following a symlink, at most `MAX_XML` bytes; None
    when there is none (the command did not get that far) or it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            if not _regular(handle.fileno()):
                return None
            return handle.read(MAX_XML + 1)
    except OSError:
        return None


def _regular(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


def read_junit(data: bytes, root: Path | None = None) -> TestCounts | None:
    """Counts from a JUnit XML report; None when it is not one. A document type (and so any
    entity) is refused before parsing. `root`: the workspace, to turn pytest's dotted class
    names back into its test ids (`tests/test_a.py::TestK::test_x`)."""
    if not data or len(data) > MAX_XML or b"<!DOCTYPE" in data.upper() or b"<!ENTITY" in data.upper():
        return None
    from xml.etree import ElementTree  # here: only a pytest run with a report pays for it

    try:
        top = ElementTree.fromstring(data)
    except (ElementTree.ParseError, ValueError):
        return None
    if top.tag not in ("testsuites", "testsuite"):
        return None
    suites = [top] if top.tag == "testsuite" else list(top.iter("testsuite"))
    passed = failed = errors = skipped = 0
    failing: list[str] = []
    messages: list[str | None] = []
    duration = 0.0
    timed = False
    where: dict[str, str] = {}  # a class name's file and classes, looked up once
    for suite in suites:
        time = number(suite.get("time"))
        if time is not None:
            duration, timed = duration + time, True
        pytest = suite.get("name") == "pytest"
        for case in suite.iter("testcase"):
            classname = case.get("classname") or ""
            if classname not in where:
                where[classname] = _case_id(classname, "", root if pytest else None)
            name = where[classname] + (case.get("name") or "")
            bad = [c for c in case if c.tag in ("failure", "error")]
            if any(c.tag == "error" for c in bad):
                errors += 1
            elif bad:
                failed += 1
            elif any(c.tag == "skipped" for c in case):
                skipped += 1
            else:
                passed += 1
            if bad:
                failing.append(name)
                messages.append(_message(bad[0]))
    return TestCounts(
        passed,
        failed,
        errors,
        skipped,
        names(failing),
        first(messages),
        round(duration, 3) if timed else None,
        reader="junit",
    )


def _message(element: ElementTree.Element) -> str | None:
    message = element.get("message") or ""
    lines = [ln for ln in message.splitlines() if ln.strip()]
    if lines:
        return lines[0]
    body = [ln for ln in (element.text or "").splitlines() if ln.strip()]
    errors = [ln[1:].strip() for ln in body if ln.startswith("E ")]
    return errors[0] if errors else (body[-1] if body else None)


def _case_id(classname: str, name: str, root: Path | None) -> str:
    """pytest's test id for a JUnit test case: the longest dotted prefix of its class name
    that is a file in `root`, then the classes, then the name; `class.name` otherwise."""
    if not classname:
        return name
    parts = classname.split(".")
    if root is not None:
        for cut in range(len(parts), 0, -1):
            path = "/".join(parts[:cut]) + ".py"
            with contextlib.suppress(OSError, ValueError):
                if (root / path).is_file():
                    return "::".join([path, *parts[cut:], name])
    return f"{classname}.{name}"

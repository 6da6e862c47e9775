"""What every reader keeps of a failure: the same text for the same failure, each turn.

A failing test's error line carries what changes from run to run (addresses, temporary paths,
times, line numbers); `normalise` takes it out so the engine can tell "the same error again".
Everything here also redacts and cuts, since the text comes from code the agent wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from loop.core.redact import redact

MAX_FAILING = 50
MAX_ERROR = 300
"""A first error line is cut to this many characters."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x…"),
    (
        re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
        "<uuid>",
    ),
    (
        re.compile(
            r"\b\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"
            r"|\b\d\d:\d\d:\d\d(?:[.,]\d+)?"
        ),
        "<time>",
    ),
    (re.compile(r"\b(pid|process|thread|port)([ =:#]+)\d+", re.I), r"\1\2<n>"),
    (
        re.compile(
            r"(?:/private)?(?:/tmp|/var/folders|/var/tmp|/dev/shm)(?:/[^\s'\"():,\]]*)?"
            r"|[A-Za-z]:\\\S*\\Temp\\\S*"
        ),
        "<tmp>",
    ),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|µs|us|ns|sec|seconds)\b"), "<t>"),
    (re.compile(r"(\.[A-Za-z]\w*):\d+(?::\d+)?"), r"\1"),
    (re.compile(r"\bline \d+"), "line"),
    (re.compile(r"\s+"), " "),
)


def normalise(line: str) -> str:
    """`line` as the same failure prints it every time: memory addresses, uuids, dates and
    times, process ids and ports, temporary paths, durations and line numbers taken out,
    colours and runs of spaces too; redacted, cut to `MAX_ERROR` characters."""
    text = ANSI.sub("", line)
    for pattern, to in _NORMALISE:
        text = pattern.sub(to, text)
    return redact(text.strip())[:MAX_ERROR]


def names(found: Iterable[str]) -> tuple[str, ...]:
    """Failing test ids: redacted, cut, without duplicates, sorted, at most `MAX_FAILING`."""
    clean = {redact(ANSI.sub("", n).strip())[:300] for n in found}
    return tuple(sorted(n for n in clean if n))[:MAX_FAILING]


def first(errors: Iterable[str | None]) -> str | None:
    """The first error line that says something, normalised."""
    for error in errors:
        if error and error.strip():
            return normalise(error)
    return None

"""What the agent said last, and whether it signalled completion.

Two failures users report in other loops shape this module (reference/claude-code.md):
ending the loop because the last transcript line was a tool call, and reading a promise out of
an echoed prompt. So the last *text* is searched for, skipping lines that hold only tool calls
and never reading a user line; and a signal counts only in the agent's own words: not inside
code, not on a line that repeats the instructions loopdeck gave it.
"""

from __future__ import annotations

import re

from loop.core.redact import redact

COMPLETE_MARKER = "ALL_TASKS_COMPLETE"

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"`+[^`]*`+")
_PROMISE = re.compile(r"<promise>(.*?)</promise>", re.DOTALL | re.IGNORECASE)
_DECORATION = " \t*_#>`.!:-"


def normalise(text: str) -> str:
    return " ".join(text.split())


def _own_words(text: str, echoed: str) -> list[str]:
    """The lines of `text` outside code fences, without inline code, minus any line that repeats
    a line of the prompt loopdeck sent (an agent quoting its instructions is not promising)."""
    echo = {normalise(line) for line in echoed.splitlines() if normalise(line)}
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        if normalise(line) in echo:
            continue
        out.append(line)
    return out


def completion_signal(text: str | None, promise: str | None, echoed: str = "") -> str | None:
    """`"ALL_TASKS_COMPLETE"` or `"promise"` when the text signals completion, else None.

    ALL_TASKS_COMPLETE counts on a line of its own (markdown emphasis allowed), so "I cannot
    say ALL_TASKS_COMPLETE yet" does not end a loop. A promise counts when the text between
    `<promise>` tags equals the configured one after whitespace normalisation.
    """
    if not text:
        return None
    lines = _own_words(text, echoed)
    for line in lines:
        if line.strip(_DECORATION) == COMPLETE_MARKER:
            return COMPLETE_MARKER
    if promise:
        wanted = normalise(promise)
        prose = _INLINE_CODE.sub("", "\n".join(lines))
        echo = normalise(echoed)
        for match in _PROMISE.finditer(prose):
            if normalise(match.group(1)) == wanted and not _quotes(prose, match, echo):
                return "promise"
    return None


def _quotes(prose: str, match: re.Match[str], echo: str) -> bool:
    """Is this promise tag part of a sentence copied from the prompt? The words just before or
    just after it, with the tag, appear in the prompt as they stand. One word is enough: a missed
    promise costs one more iteration, a false one ends the loop early."""
    if not echo:
        return False
    line_start = prose.rfind("\n", 0, match.start()) + 1
    line_end = prose.find("\n", match.end())
    before = prose[line_start : match.start()].split()[-1:]
    after = prose[match.end() : line_end if line_end != -1 else len(prose)].split()[:1]
    tag = normalise(match.group(0))
    if before and f"{' '.join(before)} {tag}" in echo:
        return True
    return bool(after) and f"{tag} {' '.join(after)}" in echo


def question(text: str | None) -> str | None:
    """The text of a `<question>…</question>` the agent asks a person, if any, redacted: it is
    kept (the state, the journal) and sent (notifications), and compared with the one kept, so
    it is the redacted text from the start."""
    if not text or "<question>" not in text:
        return None  # most turns: no pattern to compile
    match = re.search(r"<question>(.*?)</question>", "\n".join(_own_words(text, "")), re.DOTALL)
    return redact(match.group(1).strip()) if match and match.group(1).strip() else None

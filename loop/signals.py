"""What the agent said last, and whether it signalled completion.

Two failures users report in other loops shape this module (reference/claude-code.md):
ending the loop because the last transcript line was a tool call, and reading a promise out of
an echoed prompt. So the last *text* is searched for, skipping lines that hold only tool calls
and never reading a user line; and a signal counts only in the agent's own words: not inside
code, not on a line that repeats the instructions loopdeck gave it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from loop.safeopen import open_regular
from loop.tailread import lines_backwards

COMPLETE_MARKER = "ALL_TASKS_COMPLETE"
MAX_SCAN_BYTES = 32 * 1024 * 1024
"""How far back to look for the last assistant text before giving up."""
MAX_LINE_BYTES = 2 * 1024 * 1024
"""Longer transcript lines are tool results: passed over without decoding."""

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
    """The text of a `<question>…</question>` the agent asks a person, if any."""
    if not text:
        return None
    match = re.search(r"<question>(.*?)</question>", "\n".join(_own_words(text, "")), re.DOTALL)
    return match.group(1).strip() if match and match.group(1).strip() else None


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def _is_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def last_assistant_text(transcript: Path) -> str | None:
    """The text of the agent's last message, read from the transcript's end.

    Claude Code writes each content block as its own line, several sharing one `message.id`,
    and the last line is often a tool call: lines without text are skipped, and the text blocks
    of the last message that has any are joined in order. A real user prompt before any text
    means this turn said nothing (None): an older turn's words are not this turn's.
    """
    parts: list[str] = []
    message_id: object = None
    with open_regular(transcript) as f:  # a FIFO or device here must not hang the hook
        end = f.seek(0, 2)
        stop = max(0, end - MAX_SCAN_BYTES)
        for _offset, line, terminated in lines_backwards(f, end, stop):
            if not terminated or not line.strip() or len(line) > MAX_LINE_BYTES:
                continue  # a torn last line, or a giant tool result
            try:
                obj = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                continue
            if not isinstance(obj, dict):
                continue
            kind = obj.get("type")
            message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
            assert isinstance(message, dict)
            if kind == "user":
                if _is_tool_result(message.get("content")) or obj.get("toolUseResult") is not None:
                    if parts:
                        break
                    continue
                break  # a person's prompt (or hook feedback): the turn began here
            if kind != "assistant":
                continue
            texts = _texts(message.get("content"))
            ident = message.get("id")
            if parts and ident != message_id:
                break
            if texts:
                parts[:0] = texts
                message_id = ident
                if ident is None:
                    break
    return "\n".join(parts) if parts else None

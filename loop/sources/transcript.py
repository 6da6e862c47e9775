"""The agent's last words, read from the end of a Claude Code session transcript.

Apart from `loop.core.signals` (pure text rules) because this reads files: the engine may use the
rules, never the reading.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loop.store.safeopen import open_regular
from loop.store.tailread import ReadCounter, lines_backwards

MAX_SCAN_BYTES = 8 * 1024 * 1024
"""How much of the transcript's end is read, at most, looking for the last assistant text,
whether or not it holds a line start: past it the agent's words are unknown and the task
sources decide. The Stop runs on every turn, so its time is bounded by this, not by the file
(a transcript whose last 32 MB held no newline once cost 40 s a Stop)."""
MAX_LINE_BYTES = 2 * 1024 * 1024
"""Longer transcript lines are tool results: passed over without decoding."""


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


def last_assistant_text(transcript: Path, counter: ReadCounter | None = None) -> str | None:
    """The text of the agent's last message, read from the transcript's end.

    Claude Code writes each content block as its own line, several sharing one `message.id`,
    and the last line is often a tool call: lines without text are skipped, and the text blocks
    of the last message that has any are joined in order. A real user prompt before any text
    means this turn said nothing (None): an older turn's words are not this turn's.
    At most MAX_SCAN_BYTES are read (`counter` counts them).
    """
    parts: list[str] = []
    message_id: object = None
    with open_regular(transcript) as f:  # a FIFO or device here must not hang the hook
        end = f.seek(0, 2)
        stop = max(0, end - MAX_SCAN_BYTES)
        for offset, line, terminated in lines_backwards(f, end, stop, counter):
            if offset == stop and stop > 0:
                break  # cut by the budget's edge: maybe only the end of a line
            if not terminated or not line.strip() or len(line) > MAX_LINE_BYTES:
                continue  # a torn last line, or a giant tool result
            try:
                obj = json.loads(line)
            except (ValueError, UnicodeDecodeError, RecursionError):  # garbage, or nested too deep
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

"""Reading what an agent CLI printed: its JSON lines and objects, typed fields out of them, and a
short line for people. The adapters share these; each CLI's shapes stay in its own adapter."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any


def tool_results(lines: Iterator[dict[str, Any]]) -> Iterator[str]:
    """The text of every `tool_result` block in transcript lines (Claude Code's)."""
    for obj in lines:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            inner = block.get("content")
            if isinstance(inner, str):
                yield inner
            elif isinstance(inner, list):
                yield "\n".join(str(part.get("text", "")) for part in inner if isinstance(part, dict))


def json_lines(output: str) -> Iterator[dict[str, Any]]:
    """Every line of `output` that is a JSON object, in order (other lines: stderr, banners)."""
    for line in output.splitlines():
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            obj = json.loads(stripped)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def json_object(line: str) -> dict[str, Any] | None:
    """The line as a JSON object, or None (text, or JSON that is not an object)."""
    stripped = line.strip()
    if not stripped.startswith("{"):
        return None
    try:
        obj = json.loads(stripped)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def whole_json(output: str) -> dict[str, Any] | None:
    """The output's JSON object printed over several lines (`gemini --output-format json`), or
    None. Text before it (stderr warnings) is skipped; the object is the last `{` at a line start
    that parses to the end of its value."""
    starts = [i for i, line in enumerate(output.splitlines()) if line.startswith("{")]
    lines = output.splitlines()
    for start in reversed(starts):
        text = "\n".join(lines[start:])
        try:
            obj, _end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def sub(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """`obj[key]` when it is an object, else an empty one (every key of a CLI's JSON is optional)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def as_float(value: Any) -> float | None:
    """A finite number of 0 or more, else None: JSON's `Infinity` and `NaN` parse, and a cost or
    a duration that is neither would break every sum and chart after it."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            return None
        if math.isfinite(number) and number >= 0:
            return number
    return None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def brief(value: Any, width: int = 80) -> str:
    """A tool call's argument in one short line: the command, path or pattern when there is one."""
    if isinstance(value, dict):
        for key in (
            "command",
            "cmd",
            "file_path",
            "filePath",
            "path",
            "pattern",
            "url",
            "description",
            "prompt",
        ):
            if isinstance(value.get(key), str):
                value = value[key]
                break
        else:
            value = json.dumps(value, ensure_ascii=False)
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def said(text: str) -> str | None:
    """The agent's words as live lines (blank lines dropped), None when there are none."""
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines) or None


def last_line(text: str, width: int = 300) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][-width:] if lines else ""

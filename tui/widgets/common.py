"""Small pieces the panels share."""

from __future__ import annotations

from datetime import datetime

from loop.timeutil import human_duration, parse_iso


def ago(ts: str | None, now: datetime) -> str:
    moment = parse_iso(ts or "")
    if moment is None:
        return "?"
    seconds = max(0, int((now - moment).total_seconds()))
    return f"{duration(seconds)} ago"


def duration(seconds: float | None) -> str:
    return "?" if seconds is None else human_duration(seconds)


def relative(path: str, root: str) -> str:
    """`path` inside the workspace `root`, shown relative to it (shorter, and the same in every
    checkout, which keeps screenshots stable)."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"

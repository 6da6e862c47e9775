"""Small pieces the panels share."""

from __future__ import annotations

from datetime import datetime

from loop.timeutil import parse_iso


def ago(ts: str | None, now: datetime) -> str:
    moment = parse_iso(ts or "")
    if moment is None:
        return "?"
    seconds = max(0, int((now - moment).total_seconds()))
    return f"{duration(seconds)} ago"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"

"""Usage and rate limits, recognised in what an agent said when its run failed.

A subscription's limit ("limit reached · resets 5pm", HTTP 429) is not a failure of the work:
retrying burns the retries in seconds and escalates a loop that only had to wait. The forms
Claude Code has used: `Claude AI usage limit reached|<epoch seconds>` in older versions, "You've
hit your session limit · resets 5pm (Europe/Paris)" in 2.1.x, an `api_error_status` of 429 in
the `-p` JSON result. Other agent CLIs (their adapters in `loop.agents` know where to look) say
"try again at 12:44 PM" (Codex), "Please retry in 30s." (Gemini), or give a duration in a header
(`retry-after: 2`, `x-ratelimit-reset-requests: 1m30s`, OpenCode). The text helpers for all of
them live here. Pure: the clock is an argument.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

_EPOCH = re.compile(r"usage limit reached\|(\d{9,11})", re.IGNORECASE)
_RESETS = re.compile(
    r"(?:resets(?:\s+at)?|try again at)\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)"
    r"(?:\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\))?",
    re.IGNORECASE,
)
_LIMIT_WORDS = re.compile(
    r"(usage limit|rate limit|rate-limit|session limit|weekly limit|5-hour limit|quota exceeded|"
    r"too many requests|limit reached|hit your (?:\w+ )?limit|resource.exhausted|exhausted your|"
    r"insufficient.quota)",
    re.IGNORECASE,
)


def usage_limit(
    text: str | None, api_error_status: int | None, now: datetime, local: tzinfo | None = None
) -> tuple[str, str | None] | None:
    """`(what the agent said, when it resets as ISO 8601 or None)` when `text` (the failed run's
    output) or the API status names a usage or rate limit; None otherwise."""
    said = _line(text) if text else None
    if api_error_status == 429 or (said is not None and _LIMIT_WORDS.search(said)):
        reason = said or "rate limited (HTTP 429)"
        return reason[:300], resets_at(text or "", now, local)
    return None


def resets_at(text: str, now: datetime, local: tzinfo | None = None) -> str | None:
    """When the limit resets, as the text says it: an epoch, or a clock time (the next one after
    `now`, in the named time zone or the machine's)."""
    epoch = _EPOCH.search(text)
    if epoch:
        return datetime.fromtimestamp(int(epoch.group(1)), UTC).isoformat()
    clock = _RESETS.search(text)
    if not clock:
        return None
    hour, minute = int(clock.group(1)), int(clock.group(2) or 0)
    if not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if clock.group(3).lower() == "pm" else 0)
    zone = _zone(clock.group(4)) or local or now.astimezone().tzinfo or UTC
    here = now.astimezone(zone)
    moment = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= here - timedelta(minutes=1):
        moment += timedelta(days=1)
    elif moment <= here:  # a clock time names its minute: "2:06 PM" said at 2:06:30 is not tomorrow
        moment += timedelta(minutes=1)
    return moment.astimezone(UTC).isoformat()


def _zone(name: str | None) -> tzinfo | None:
    if not name:
        return None
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except (ImportError, ValueError, KeyError, OSError):
        return None


def _line(text: str) -> str | None:
    """The line that names the limit (the output's last such line), else None."""
    for line in reversed(text.strip().splitlines()[-50:]):
        if _LIMIT_WORDS.search(line) or _EPOCH.search(line):
            return line.strip()
    return None


_DURATION_PART = (
    r"\d+(?:\.\d+)?\s*(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?)(?![a-z])"
)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_s(text: str) -> float | None:
    """Seconds in a duration as APIs write it: `30`, `2.5s`, `6ms`, `1m30s`, `2h0m0s`, `5 minutes`;
    None when it is none of these."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(ms|[a-z]+)", text)
    if not parts or not re.fullmatch(rf"(?:{_DURATION_PART}\s*)+", text):
        return None
    total = 0.0
    for number, unit in parts:
        key = "ms" if unit.startswith("mil") or unit == "ms" else unit[0]
        total += float(number) * _UNITS[key]
    return total


def retry_in(text: str, now: datetime) -> str | None:
    """When "retry in 30s" / "try again in 1m30s" (in the text) comes, as ISO 8601; else None."""
    found = re.search(
        rf"(?:retry|try again)\s+(?:in|after)\s+((?:{_DURATION_PART}\s*)+)", text, re.IGNORECASE
    )
    if not found:
        return None
    seconds = duration_s(found.group(1))
    if seconds is None or seconds > 31 * 86400:
        return None
    return (now + timedelta(seconds=seconds)).isoformat()

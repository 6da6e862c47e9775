"""Usage and rate limits, recognised in what an agent said when its run failed.

A subscription's limit ("limit reached · resets 5pm", HTTP 429) is not a failure of the work:
retrying burns the retries in seconds and escalates a loop that only had to wait. The forms
Claude Code has used: `Claude AI usage limit reached|<epoch seconds>` in older versions, "You've
hit your session limit · resets 5pm (Europe/Paris)" in 2.1.x, an `api_error_status` of 429 in
the `-p` JSON result; other agent CLIs say "rate limit" or "usage limit" in plain text. Pure: the
clock is an argument.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

_EPOCH = re.compile(r"usage limit reached\|(\d{9,11})", re.IGNORECASE)
_RESETS = re.compile(
    r"resets(?:\s+at)?\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)(?:\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\))?",
    re.IGNORECASE,
)
_LIMIT_WORDS = re.compile(
    r"(usage limit|rate limit|rate-limit|session limit|weekly limit|5-hour limit|quota exceeded|"
    r"too many requests|limit reached|hit your (?:\w+ )?limit)",
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
    if moment <= here:
        moment += timedelta(days=1)
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

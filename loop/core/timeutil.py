"""Timestamps as loopdeck writes them: UTC, ISO 8601, easy to sort and to grep."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso_ms(moment: datetime) -> str:
    """Journal precision: milliseconds, `Z` suffix (`2025-01-17T14:00:00.123Z`)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_s(moment: datetime) -> str:
    """The `started_at` form (`2026-01-09T10:30:00+00:00`)."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat()


def parse_iso(text: str) -> datetime | None:
    """Best effort: `None` for anything that is not a timestamp, never an exception."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def human_duration(seconds: object) -> str:
    """`3m 48s`, `1h 02m 05s`, `7s`; `?` for anything not a number."""
    try:
        total = round(float(seconds))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "?"
    hours, rest = divmod(max(0, total), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def log_stamp(text: str) -> str:
    """The log-line stamp, to the second: `2025-01-17T14:00:00Z`."""
    moment = parse_iso(text)
    if moment is None:
        return text
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")

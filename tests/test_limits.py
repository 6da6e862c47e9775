"""Usage limits recognised in every form the agent CLIs have printed, with their reset times."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loop.core.limits import resets_at, usage_limit

NOW = datetime(2026, 11, 26, 14, 0, tzinfo=UTC)


def test_the_old_epoch_form() -> None:
    found = usage_limit("Claude AI usage limit reached|1795708800", None, NOW)
    assert found is not None and found[1] == "2026-11-26T16:00:00+00:00"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("You've hit your session limit · resets 5pm", "2026-11-26T17:00:00+00:00"),
        ("5-hour limit reached ∙ resets 3am", "2026-11-27T03:00:00+00:00"),  # tomorrow
        ("You've hit your limit · resets 5:30pm (Europe/Paris)", "2026-11-26T16:30:00+00:00"),
        ("weekly limit reached · resets at 11am (America/New_York)", "2026-11-26T16:00:00+00:00"),
    ],
)
def test_the_clock_forms(text: str, expected: str) -> None:
    found = usage_limit(f"some output\n{text}\n", None, NOW, local=UTC)
    assert found is not None and found == (text, expected)


def test_http_429_without_words() -> None:
    assert usage_limit(None, 429, NOW) == ("rate limited (HTTP 429)", None)
    assert usage_limit("", 429, NOW) == ("rate limited (HTTP 429)", None)


def test_other_clis_plain_text_without_a_time() -> None:
    found = usage_limit("Error: Rate limit exceeded, please try again later", None, NOW)
    assert found is not None and found[1] is None


def test_ordinary_failures_are_not_limits() -> None:
    assert usage_limit("Traceback: ZeroDivisionError", None, NOW) is None
    assert usage_limit("exit 1", 500, NOW) is None
    assert usage_limit(None, None, NOW) is None


def test_nonsense_times_and_zones_do_not_crash() -> None:
    assert resets_at("resets 13pm", NOW) is None
    assert resets_at("resets 5pm (Not/AZone)", NOW, local=UTC) == "2026-11-26T17:00:00+00:00"
    assert resets_at("nothing here", NOW) is None


def test_codex_says_try_again_at_a_clock_time() -> None:
    text = "You’ve hit your usage limit. Upgrade to Pro (…) or try again at 2:44 PM."
    found = usage_limit(text, None, NOW, local=UTC)
    assert found is not None and found[1] == "2026-11-26T14:44:00+00:00"


def test_a_clock_time_in_the_current_minute_is_not_tomorrow() -> None:
    now = datetime(2026, 11, 26, 14, 44, 30, tzinfo=UTC)
    assert resets_at("try again at 2:44 PM", now, local=UTC) == "2026-11-26T14:45:00+00:00"
    assert resets_at("try again at 2:43 PM", now, local=UTC) == "2026-11-27T14:43:00+00:00"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30.0), ("2.5s", 2.5), ("6ms", 0.006), ("1m30s", 90.0), ("2h0m0s", 7200.0), ("5 minutes", 300.0)],
)
def test_durations_as_apis_write_them(text: str, seconds: float) -> None:
    from loop.core.limits import duration_s

    assert duration_s(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "soon", "3sx", "-5", "1m and then some", "Thu, 26 Nov 2026 15:00:00 GMT"]
)
def test_what_is_not_a_duration(text: str) -> None:
    from loop.core.limits import duration_s

    assert duration_s(text) is None


def test_retry_in_the_servers_words() -> None:
    from loop.core.limits import retry_in

    assert retry_in("Quota exceeded. Please retry in 3s.", NOW) == "2026-11-26T14:00:03+00:00"
    assert retry_in("Rate limit reached. Please try again in 1m30s.", NOW) == "2026-11-26T14:01:30+00:00"
    assert retry_in("no hint here", NOW) is None
    assert retry_in("retry in 999999h", NOW) is None  # nonsense: the loop backs off instead


@pytest.mark.parametrize(
    "text",
    [
        "[API Error: You have exhausted your daily quota on this model.]",
        "429 RESOURCE_EXHAUSTED",
        "Quota exceeded. Check your plan and billing details.",
        "insufficient_quota",
    ],
)
def test_other_clis_limit_words(text: str) -> None:
    assert usage_limit(text, None, NOW) is not None

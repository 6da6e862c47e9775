"""Usage limits recognised in every form the agent CLIs have printed, with their reset times."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loop.limits import resets_at, usage_limit

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

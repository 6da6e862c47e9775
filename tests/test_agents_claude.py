"""Reading `claude -p --output-format json` results, from outputs of the real CLI (2.1.332)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop.agents.claude import allow_hint, parse

FIXTURES = Path(__file__).parent / "fixtures" / "claude-result"


def load(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_success() -> None:
    result = parse(load("success.json"))
    assert result is not None
    assert result.text == "All done." and result.subtype == "success" and not result.failed
    assert result.denials == () and result.api_error_status is None
    assert result.total_cost_usd is not None and result.total_cost_usd > 0
    assert result.usage["output_tokens"] > 0 and result.num_turns == 2 and result.session_id


def test_permission_denials_look_like_success() -> None:
    result = parse(load("permission-denials.json"))
    assert result is not None and not result.failed and result.subtype == "success"
    assert result.denied_tools == ["Bash", "Write"]
    assert result.denials[0].tool_input["command"] == "echo hi > b.txt"
    assert "--allowedTools Bash Write" in allow_hint(result.denied_tools)


def test_error_max_turns_has_no_result_but_errors() -> None:
    result = parse(load("error-max-turns.json"))
    assert result is not None and result.failed and result.is_error
    assert result.subtype == "error_max_turns" and result.text is None
    assert result.errors and "turns" in result.errors[0]


def test_api_error_reads_success_but_is_an_error() -> None:
    result = parse(load("api-error.json"))
    assert result is not None and result.subtype == "success"
    assert result.is_error and result.failed and result.api_error_status == 400


def test_stream_json_last_result_event() -> None:
    text = load("stream.jsonl")
    assert len(text.splitlines()) > 2
    result = parse(text)
    assert result is not None and result.text == "Streamed answer."


@pytest.mark.parametrize(
    "text", ["", "plain words", '{"type": "assistant"}', "{broken", '[{"type": "result"}]']
)
def test_no_result(text: str) -> None:
    assert parse(text) is None


def test_defensive_on_odd_values() -> None:
    result = parse(
        '{"type": "result", "permission_denials": [1, {"tool_name": 3}, {"tool_name": "Edit", "tool_input": "x"}], "total_cost_usd": true, "api_error_status": "500", "errors": "x"}'
    )
    assert result is not None
    assert result.denied_tools == ["Edit"] and result.total_cost_usd is None
    assert result.api_error_status is None and result.errors == () and result.text is None
    assert parse(b'{"type": "result", "result": "bytes"}').text == "bytes"  # type: ignore[union-attr]

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop.core.signals import completion_signal, question
from loop.sources.transcript import last_assistant_text
from tests.conftest import SAMPLES

SMALL = SAMPLES / "claude-code-viewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
LARGE = SAMPLES / "claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


@pytest.mark.parametrize(
    ("text", "promise", "expected"),
    [
        ("All done.\nALL_TASKS_COMPLETE", None, "ALL_TASKS_COMPLETE"),
        ("**ALL_TASKS_COMPLETE**", None, "ALL_TASKS_COMPLETE"),
        ("  ALL_TASKS_COMPLETE.  ", None, "ALL_TASKS_COMPLETE"),
        ("I cannot say ALL_TASKS_COMPLETE yet", None, None),
        ("```\nALL_TASKS_COMPLETE\n```", None, None),
        ("NOT_ALL_TASKS_COMPLETE", None, None),
        ("<promise>SPRINT COMPLETE</promise>", "SPRINT COMPLETE", "promise"),
        ("<promise>  sprint\n  COMPLETE </promise>", "SPRINT COMPLETE", None),
        ("<promise>  SPRINT\n  COMPLETE </promise>", "SPRINT COMPLETE", "promise"),
        ("<promise>SPRINT DONE</promise>", "SPRINT COMPLETE", None),
        ("Use `<promise>SPRINT COMPLETE</promise>` when done", "SPRINT COMPLETE", None),
        ("<promise>SPRINT COMPLETE</promise>", None, None),
        ("", "X", None),
        (None, "X", None),
    ],
)
def test_completion_signal(text: str | None, promise: str | None, expected: str | None) -> None:
    assert completion_signal(text, promise) == expected


def test_echoed_prompt_is_not_a_promise() -> None:
    prompt = "Build the API.\nWhen done output <promise>API READY</promise>"
    echo = "You asked me to:\nWhen done output <promise>API READY</promise>\nStarting now."
    assert completion_signal(echo, "API READY", echoed=prompt) is None
    assert (
        completion_signal("Finished.\n<promise>API READY</promise>", "API READY", echoed=prompt) == "promise"
    )
    quoted = "Per the task I should output <promise>API READY</promise> when done, not yet."
    assert completion_signal(quoted, "API READY", echoed=prompt) is None
    assert (
        completion_signal("All verified: <promise>API READY</promise>", "API READY", echoed=prompt)
        == "promise"
    )


def test_question() -> None:
    assert question("Hmm.\n<question>Which database?</question>") == "Which database?"
    assert question("<question> </question>") is None
    assert question("```\n<question>x</question>\n```") is None


def test_last_text_of_real_transcripts() -> None:
    small = last_assistant_text(SMALL)
    assert small is not None and small.startswith("I've created a basic CLAUDE.md file")
    large = last_assistant_text(LARGE)
    assert large is not None and "サーバー情報の更新" in large


def _line(kind: str, content: list[dict[str, object]], mid: str = "m1", **extra: object) -> str:
    return json.dumps({"type": kind, "message": {"id": mid, "role": kind, "content": content}, **extra})


def test_skips_tool_call_lines_and_joins_one_message(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            [
                _line("user", [{"type": "text", "text": "please"}]),
                _line("assistant", [{"type": "text", "text": "first part"}], "m2"),
                _line("assistant", [{"type": "tool_use", "name": "Bash", "input": {}}], "m2"),
                _line("assistant", [{"type": "text", "text": "ALL_TASKS_COMPLETE"}], "m2"),
                _line("assistant", [{"type": "tool_use", "name": "TodoWrite", "input": {"todos": []}}], "m2"),
            ]
        )
        + "\n"
        + '{"type":"assistant","message":{"content":[{"type":"te'
    )
    assert last_assistant_text(path) == "first part\nALL_TASKS_COMPLETE"


def test_never_reads_a_user_line_or_an_older_turn(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            [
                _line("assistant", [{"type": "text", "text": "ALL_TASKS_COMPLETE"}], "old"),
                _line("user", [{"type": "text", "text": "keep going, ALL_TASKS_COMPLETE is not true"}]),
                _line("assistant", [{"type": "tool_use", "name": "Bash", "input": {}}], "new"),
                _line("user", [{"type": "tool_result", "content": "ALL_TASKS_COMPLETE"}], toolUseResult={}),
                _line("assistant", [{"type": "tool_use", "name": "Edit", "input": {}}], "new2"),
            ]
        )
        + "\n"
    )
    assert last_assistant_text(path) is None


def test_text_before_tool_results_in_this_turn(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        "\n".join(
            [
                _line("user", [{"type": "text", "text": "go"}]),
                _line("assistant", [{"type": "text", "text": "Let me check."}], "a"),
                _line("assistant", [{"type": "tool_use", "name": "Bash", "input": {}}], "a"),
                _line("user", [{"type": "tool_result", "content": "ok"}], toolUseResult={}),
                _line("assistant", [{"type": "tool_use", "name": "Bash", "input": {}}], "b"),
                "garbage line",
                "",
            ]
        )
        + "\n"
    )
    assert last_assistant_text(path) == "Let me check."

"""`/orchestrator-loop` typed into the real Claude Code CLI (print mode, offline against the mock
Messages API) exactly as the loop's documentation writes it: each line starts a loop with the
values written, a sentence keeps its option words, and ` -- ` still separates options."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Project, claude_binary
from tests.e2e.mockapi import MockAPI, Request, Turn, say

CLAUDE, WHY = claude_binary()
if CLAUDE is None:
    pytest.skip(WHY, allow_module_level=True)

pytestmark = pytest.mark.e2e

COMPLETE = "ALL_TASKS_COMPLETE"
ANY_PROMPT = object()
"""The loop started from options alone has loopdeck's own prompt: any text will do."""

# The slash lines of the loop's documentation, exactly as it writes them, and the loop each starts.
DOCUMENTED: list[tuple[str, object, int, str | None]] = [
    ('/orchestrator-loop "My task"', "My task", 100, None),
    ('/orchestrator-loop "My task" --max-iterations 50', "My task", 50, None),
    ('/orchestrator-loop "My task" --max-iterations 0', "My task", 0, None),
    ('/orchestrator-loop --completion-promise "SPRINT COMPLETE"', ANY_PROMPT, 100, "SPRINT COMPLETE"),
]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    assert CLAUDE is not None
    with MockAPI(log_file=tmp_path / "requests.jsonl") as api:
        yield Project(tmp_path, CLAUDE, api)
        assert api.errors == [], api.errors


def finisher(promise: str | None) -> Any:
    """A model with nothing to do: it says it is done (with the loop's promise when it has
    one), and reviews when asked to."""

    def script(request: Request) -> Turn:
        if "VERIFICATION LOOP" in request.last_user_text():
            return say("Reviewed: nothing to fix.")
        return say(f"<promise>{promise}</promise>" if promise else COMPLETE)

    return script


def started(project: Project, line: str, promise: str | None = None) -> dict[str, Any]:
    """Type `line` into Claude Code in a fresh installed project; the `loop-started` data."""
    project.commit()
    project.loopdeck("install")
    project.api.script = finisher(promise)
    result = project.claude(line)
    assert result.code == 0, result.stdout + result.stderr
    events = [e for e in project.events() if e["kind"] == "loop-started"]
    assert len(events) == 1, (project.kinds(), result.stdout)
    assert "completed" in project.kinds(), project.kinds()  # and the loop it started ran to its end
    data: dict[str, Any] = events[0]["data"]
    return data


@pytest.mark.parametrize(("line", "prompt", "max_iterations", "promise"), DOCUMENTED)
def test_the_documented_lines_start_loops_with_exactly_the_values_written(
    project: Project, line: str, prompt: object, max_iterations: int, promise: str | None
) -> None:
    data = started(project, line, promise)
    assert data["max_iterations"] == max_iterations
    assert data["promise"] == promise
    if prompt is not ANY_PROMPT:
        assert data["prompt"] == prompt
    else:
        assert data["prompt"] and "--" not in data["prompt"] and "SPRINT" not in data["prompt"]


def test_options_after_a_separator_still_work(project: Project) -> None:
    data = started(project, "/orchestrator-loop Build the todo API -- --max-iterations 50 --no-github")
    assert (data["prompt"], data["max_iterations"], data["check_github"]) == ("Build the todo API", 50, False)


def test_a_pasted_sentence_keeps_its_option_words(project: Project) -> None:
    data = started(project, "/orchestrator-loop Stop using git push --force --max-iterations 5")
    assert data["prompt"] == "Stop using git push --force --max-iterations 5"
    assert data["max_iterations"] == 100

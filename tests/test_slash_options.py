"""`/orchestrator-loop` as the documentation writes it: a quoted prompt followed by options, and
options alone, are read as shell-like words; a sentence stays a sentence, ` -- ` still works."""

from __future__ import annotations

import pytest

from loop.drivers import hook_prompt
from loop.drivers.hook_prompt import DEFAULT_PROMPT, Invocation, parse
from loop.store.paths import Workspace
from loop.store.state import StateStore

# The slash lines of the loop's documentation, exactly as it writes them.
DOCUMENTED = {
    '/orchestrator-loop "My task"': ("My task", 100, "null"),
    '/orchestrator-loop "My task" --max-iterations 50': ("My task", 50, "null"),
    '/orchestrator-loop "My task" --max-iterations 0': ("My task", 0, "null"),
    '/orchestrator-loop --completion-promise "SPRINT COMPLETE"': (DEFAULT_PROMPT, 100, "SPRINT COMPLETE"),
}


def payload(ws: Workspace, prompt: str) -> dict[str, object]:
    return {"session_id": "s1", "cwd": str(ws.root), "hook_event_name": "UserPromptSubmit", "prompt": prompt}


@pytest.mark.parametrize("line", list(DOCUMENTED))
def test_the_documented_lines_start_loops_with_exactly_the_values_written(ws: Workspace, line: str) -> None:
    prompt, max_iterations, promise = DOCUMENTED[line]
    out = hook_prompt.handle(payload(ws, line), {})
    assert out is not None and "decision" not in out, out
    assert "systemMessage" not in out  # nothing stayed in the prompt: nothing to tell
    state = StateStore(ws).read()
    assert state is not None
    assert (state.prompt, state.max_iterations, state.completion_promise) == (prompt, max_iterations, promise)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a quoted prompt, then options: shell-like words
        (
            "/orchestrator-loop 'Fix the login' --task-file TODO.md --no-github --max-cost=2.5",
            Invocation(
                "orchestrator-loop",
                "Fix the login",
                {"task-file": "TODO.md", "no-github": True, "max-cost": "2.5"},
            ),
        ),
        # a quote keeps its apostrophe, its newline and its shell characters as text
        (
            '/orchestrator-loop "it\'s $(touch x)\nline two" --stuck-after 4',
            Invocation("orchestrator-loop", "it's $(touch x)\nline two", {"stuck-after": "4"}),
        ),
        # options first, then the prompt; plain words join the prompt
        (
            '/orchestrator-loop --max-iterations 7 "Ship it" now',
            Invocation("orchestrator-loop", "Ship it now", {"max-iterations": "7"}),
        ),
        # the ' -- ' form reads the same after a quoted prompt
        (
            '/orchestrator-loop "My task" -- --max-iterations 50',
            Invocation("orchestrator-loop", "My task", {"max-iterations": "50"}),
        ),
        # a value that looks like an option is still the value
        (
            "/orchestrator-loop --completion-promise --done-- 'X'",
            Invocation("orchestrator-loop", "X", {"completion-promise": "--done--"}),
        ),
    ],
)
def test_a_command_line_is_read_as_shell_like_words(text: str, expected: Invocation) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "prompt", "options", "kept"),
    [
        # a sentence keeps its option words, and the person is told
        ("/orchestrator-loop Stop using git push --force", "Stop using git push --force", {}, ["--force"]),
        (
            "/orchestrator-loop Build X --task-file TODO.md --max-iterations 5",
            "Build X --task-file TODO.md --max-iterations 5",
            {},
            ["--max-iterations", "--task-file"],
        ),
        # ' -- ' still separates a sentence from its options
        (
            "/orchestrator-loop Build the todo API -- --task-file TODO.md --max-iterations 50",
            "Build the todo API",
            {"task-file": "TODO.md", "max-iterations": "50"},
            [],
        ),
        # a quote that cannot be closed (an apostrophe) is a sentence, byte for byte
        (
            '/orchestrator-loop "Save" doesn\'t work --force',
            '"Save" doesn\'t work --force',
            {},
            ["--force"],
        ),
        # a bare ' -- ' at the start, then words: a sentence, as before
        ("/orchestrator-loop -- not an option", "-- not an option", {}, []),
    ],
)
def test_a_sentence_stays_a_sentence(
    text: str, prompt: str, options: dict[str, object], kept: list[str]
) -> None:
    found = parse(text)
    assert found is not None and found.problem is None
    assert (found.prompt, found.options, found.kept) == (prompt, options, kept)


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ('/orchestrator-loop "Fix it" --verify "pytest -q"', ["--verify"]),
        ("/orchestrator-loop --notify cmd:evil --max-iterations 3", ["--notify"]),
        ("/orchestrator-loop 'Fix it' --force", ["--force"]),
        ("/orchestrator-loop 'Fix it' --verify=make --yes", ["--verify", "--yes"]),
    ],
)
def test_a_command_line_never_takes_what_runs_or_sends(ws: Workspace, text: str, refused: list[str]) -> None:
    found = parse(text)
    assert found is not None and found.refused == refused
    out = hook_prompt.handle(payload(ws, text), {})
    assert out is not None and out["decision"] == "block"
    assert "can only be given in a terminal" in out["reason"] and "loopdeck -C" in out["reason"]
    assert "pytest -q" not in out["reason"] and "evil" not in out["reason"]
    assert not ws.state.exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('/orchestrator-loop "My task" --max-iteration 50', "'--max-iteration' is not an option"),
        ('/orchestrator-loop "My task" --max-iterations', "--max-iterations needs a value"),
        ('/orchestrator-loop "My task" --max-iterations fifty', "--max-iterations takes a whole number"),
    ],
)
def test_a_mistyped_command_line_starts_nothing_and_says_why(ws: Workspace, text: str, problem: str) -> None:
    out = hook_prompt.handle(payload(ws, text), {})
    assert out is not None and out["decision"] == "block" and problem in out["reason"], out
    assert not ws.state.exists()


def test_a_sentence_with_option_words_starts_with_them_in_its_prompt(ws: Workspace) -> None:
    out = hook_prompt.handle(payload(ws, "/orchestrator-loop Stop using git push --force"), {})
    assert out is not None and "decision" not in out
    assert "--force stayed part of the prompt" in out["systemMessage"]
    assert '"PROMPT" --task-file' in out["systemMessage"]  # the person is shown how to give options
    state = StateStore(ws).read()
    assert state is not None and state.prompt == "Stop using git push --force" and state.max_iterations == 100


def test_a_pasted_text_too_long_to_be_typed_is_a_sentence() -> None:
    text = '"Logs" --max-iterations 5 ' + "line\n" * (hook_prompt.COMMAND_LINE_CHARS // 5)
    found = parse("/orchestrator-loop " + text)
    assert found is not None and found.options == {} and found.prompt == text.strip()
    assert found.kept == ["--max-iterations"]

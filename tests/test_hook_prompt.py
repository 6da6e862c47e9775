"""`loopdeck hook prompt`: the slash commands reach loopdeck as data, never through a shell."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from loop.drivers import hook_prompt
from loop.drivers.hook_prompt import Invocation, parse
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import another_machine

NASTY = 'it\'s "quoted" (paren); $(touch pwned) `touch pwned2` \\ $HOME\nsecond line'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/orchestrator-loop Build it", Invocation("orchestrator-loop", "Build it")),
        (
            f"/orchestrator-loop {NASTY} -- --task-file TODO.md --max-iterations 5",
            Invocation("orchestrator-loop", NASTY, {"task-file": "TODO.md", "max-iterations": "5"}),
        ),
        (
            "/orchestrator-loop Fix it -- --completion-promise 'ALL DONE' --no-github",
            Invocation("orchestrator-loop", "Fix it", {"completion-promise": "ALL DONE", "no-github": True}),
        ),
        ("/orchestrator-loop", Invocation("orchestrator-loop", "")),
        ("/orchestrator-loop\nline one\nline two", Invocation("orchestrator-loop", "line one\nline two")),
        # a ' -- ' whose tail is not options belongs to the prompt
        (
            "/orchestrator-loop Fix x -- it is urgent",
            Invocation("orchestrator-loop", "Fix x -- it is urgent"),
        ),
        # a prompt that holds ' -- --…' itself ends with ' --'
        ("/orchestrator-loop A -- --verbose flag --", Invocation("orchestrator-loop", "A -- --verbose flag")),
        ("/loop-pause", Invocation("loop-pause")),
        ("/loop-cancel now", Invocation("loop-cancel")),
        ("/orchestrator-loopy x", None),
        ("please /orchestrator-loop x", None),
        ("/other", None),
        ("", None),
    ],
)
def test_parse(text: str, expected: Invocation | None) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "prompt", "kept"),
    [
        # options mid-sentence, or at the end without ' -- ', are the person's words
        ("/orchestrator-loop Stop using git push --force", "Stop using git push --force", ["--force"]),
        (
            "/orchestrator-loop Fix #12 --verify \"make 'x:=$(shell touch M)'\"",
            "Fix #12 --verify \"make 'x:=$(shell touch M)'\"",
            ["--verify"],
        ),
        ("/orchestrator-loop Build X --task-file TODO.md", "Build X --task-file TODO.md", ["--task-file"]),
    ],
)
def test_options_outside_the_tail_stay_in_the_prompt(text: str, prompt: str, kept: list[str]) -> None:
    found = parse(text)
    assert found is not None and found.prompt == prompt and found.options == {} and found.kept == kept


@pytest.mark.parametrize(
    ("tail", "refused"),
    [
        ("--force", ["--force"]),
        ("--verify 'pytest -q'", ["--verify"]),
        ("--task-file T.md --notify cmd:evil", ["--notify"]),
        ("--verify=make --force", ["--verify", "--force"]),
    ],
)
def test_options_that_run_or_send_are_never_taken_from_a_chat(tail: str, refused: list[str]) -> None:
    found = parse(f"/orchestrator-loop Do it -- {tail}")
    assert found is not None and found.refused == refused and found.problem is not None


def payload(ws: Workspace, prompt: str) -> dict[str, object]:
    return {"session_id": "s1", "cwd": str(ws.root), "hook_event_name": "UserPromptSubmit", "prompt": prompt}


def test_start_keeps_the_prompt_byte_exact_and_runs_nothing(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    out = hook_prompt.handle(
        payload(ws, f"/orchestrator-loop {NASTY} -- --task-file TODO.md --no-github"), {}
    )
    assert out is not None and "decision" not in out
    assert "loop started" in out["hookSpecificOutput"]["additionalContext"]
    state = StateStore(ws).read()
    assert state is not None and state.prompt == NASTY and state.task_file == "TODO.md"
    assert not (tmp_path / "pwned").exists() and not (ws.root / "pwned").exists()
    assert not (tmp_path / "pwned2").exists() and not (ws.root / "pwned2").exists()


def test_refusal_blocks_the_prompt(ws: Workspace) -> None:
    assert hook_prompt.handle(payload(ws, "/orchestrator-loop first"), {}) is not None
    out = hook_prompt.handle(payload(ws, "/orchestrator-loop second"), {})
    assert out is not None and out["decision"] == "block" and "already" in out["reason"]
    bad = hook_prompt.handle(payload(ws, "/orchestrator-loop x -- --max-iterations many"), {})
    assert bad is not None and bad["decision"] == "block"


def test_pause_resume_cancel_are_queued(ws: Workspace) -> None:
    from loop.store import control

    hook_prompt.handle(payload(ws, "/orchestrator-loop work"), {"CLAUDE_PROJECT_DIR": str(ws.root)})
    for text in ("/loop-pause", "/orchestrator-loop", "/loop-cancel"):
        out = hook_prompt.handle(payload(ws, text), {"CLAUDE_PROJECT_DIR": str(ws.root)})
        assert out is not None and "decision" not in out, out
    commands, _bad, _end = control.read_since(ws.control, 0)
    assert [c.kind for c in commands] == ["pause", "resume", "stop"]
    status = hook_prompt.handle(payload(ws, "/loop-status"), {"CLAUDE_PROJECT_DIR": str(ws.root)})
    assert status is not None and "additionalContext" in status["hookSpecificOutput"]


def test_other_prompts_and_bad_input_get_no_answer(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    assert hook_prompt.handle(payload(ws, "just do the thing"), {}) is None
    for raw in (b"not json", b"[1]", json.dumps(payload(ws, "hello")).encode()):
        assert hook_prompt.main(io.BytesIO(raw), {}) == 0
    assert capsys.readouterr().out == ""
    assert not ws.state.exists()


def test_main_prints_one_json_object(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    raw = json.dumps(payload(ws, "/orchestrator-loop go")).encode()
    assert hook_prompt.main(io.BytesIO(raw), {"CLAUDE_PROJECT_DIR": str(ws.root)}) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"


def test_resume_from_another_session_adopts_a_paused_loop(ws: Workspace) -> None:
    env = {"CLAUDE_PROJECT_DIR": str(ws.root)}
    hook_prompt.handle(payload(ws, "/orchestrator-loop work"), env)
    store = StateStore(ws)
    with store.locked():
        state = store.read()
        assert state is not None
        state.session_id, state.status = "s0", "paused"
        store.write(state)
    other = {**payload(ws, "/orchestrator-loop"), "session_id": "s9", "transcript_path": "/t/s9.jsonl"}
    assert hook_prompt.handle(other, env) is not None
    state = store.read()
    assert state is not None and state.session_id == "s9" and state.transcript_path == "/t/s9.jsonl"
    running = {**payload(ws, "/orchestrator-loop"), "session_id": "s7"}
    with store.locked():
        state = store.read()
        assert state is not None
        state.status = "running"
        store.write(state)
    hook_prompt.handle(running, env)  # a running loop is never taken from its session
    assert (store.read() or state).session_id == "s9"


def test_a_refused_option_blocks_and_shows_the_terminal_command(ws: Workspace) -> None:
    """`--verify` typed in a chat: nothing starts, the person reads why and what to run instead;
    the model never sees the prompt."""
    out = hook_prompt.handle(
        payload(ws, "/orchestrator-loop Fix #12 -- --task-file T.md --verify 'make x'"), {}
    )
    assert out is not None and out["decision"] == "block"
    assert "--verify can only be given in a terminal" in out["reason"]
    assert (
        "loopdeck -C" in out["reason"]
        and "start --task-file T.md --verify VERIFY -- 'Fix #12'" in out["reason"]
    )
    assert "make x" not in out["reason"]  # the pasted command is not offered back to run
    assert not ws.state.exists()


def test_a_mid_sentence_option_is_kept_and_the_person_told(ws: Workspace) -> None:
    """Regression: `/orchestrator-loop Stop using git push --force` archived the active loop and
    started "Stop using git push"."""
    assert hook_prompt.handle(payload(ws, "/orchestrator-loop first"), {}) is not None
    out = hook_prompt.handle(payload(ws, "/orchestrator-loop Stop using git push --force"), {})
    assert out is not None and out["decision"] == "block" and "already" in out["reason"]
    state = StateStore(ws).read()
    assert state is not None and state.prompt == "first"  # not replaced
    fresh = Workspace(ws.root.parent / "fresh")
    (fresh.root / ".claude").mkdir(parents=True)
    out = hook_prompt.handle(
        payload(fresh, "/orchestrator-loop Fix #12 --verify \"make 'x:=$(shell touch M)'\""), {}
    )
    assert out is not None and "decision" not in out
    assert "--verify stayed part of the prompt" in out["systemMessage"]
    state = StateStore(fresh).read()
    assert state is not None and state.verify == [] and state.prompt.startswith("Fix #12 --verify")


def test_an_ambiguous_tail_blocks(ws: Workspace) -> None:
    out = hook_prompt.handle(payload(ws, "/orchestrator-loop Refactor -- --verbose output"), {})
    assert out is not None and out["decision"] == "block"
    assert (
        "'--verbose' after ' -- ' is not an option" in out["reason"]
        and "end the prompt with ' --'" in out["reason"]
    )
    assert not ws.state.exists()


def test_a_runner_agents_prompt_is_not_a_person_typing(ws: Workspace) -> None:
    """A runner's agent whose prompt (from a state file) reads `/orchestrator-loop …`: nobody typed it."""
    assert hook_prompt.handle(payload(ws, "/orchestrator-loop evil"), {"LOOPDECK_DRIVER": "runner"}) is None
    assert not ws.state.exists()


def test_resume_refuses_a_loop_nobody_here_confirmed(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"CLAUDE_PROJECT_DIR": str(ws.root)}
    hook_prompt.handle(payload(ws, "/orchestrator-loop work"), env)
    another_machine(tmp_path, monkeypatch)  # as if the state came with a clone
    out = hook_prompt.handle({**payload(ws, "/orchestrator-loop"), "session_id": "s9"}, env)
    assert out is not None and out["decision"] == "block"
    assert (
        "nobody on this machine confirmed (prompt: work)" in out["reason"]
        and "loopdeck trust" in out["reason"]
    )
    state = StateStore(ws).read()
    assert state is not None and state.session_id is None  # not adopted

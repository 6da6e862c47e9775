"""The Stop hook as Claude Code runs it: a real process, JSON on stdin, JSON (or nothing) out."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO, SAMPLES, another_machine, run_loopdeck
from tests.test_control import person

SMALL = SAMPLES / "claude-code-viewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
LARGE = SAMPLES / "claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "claude-home"
    home.mkdir()
    values = {
        "CLAUDE_CONFIG_DIR": str(home),
        "CLAUDE_CODE_TASK_LIST_ID": "",
        "LOOPDECK_TRUST_HOME": os.environ["LOOPDECK_TRUST_HOME"],  # this machine's confirmations
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)  # for the hook and the CLI run in process
    return values


def in_process(argv: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`loopdeck ARGV` run in this process, as the console script runs it: quick, and it
    exercises the same code; a few tests below keep real subprocesses."""
    from tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    fake_stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "surrogateescape")), encoding="utf-8")
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        mock.patch.object(sys, "stdin", fake_stdin),
    ):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


class Session:
    """A Claude Code session in a workspace, stopping through the real hook (in this process,
    or as a real subprocess with `subprocess=True`)."""

    def __init__(
        self, ws: Workspace, env: dict[str, str], session_id: str = "sess-1", subprocess: bool = False
    ) -> None:
        self.ws = ws
        self.env = env
        self.subprocess = subprocess
        self.session_id = session_id
        self.transcript = ws.root / "transcript.jsonl"
        if not self.transcript.exists():
            self.transcript.write_text("")

    def stop(
        self,
        text: str | None = "Working on it.",
        *,
        active: bool = True,
        raw: str | None = None,
        **extra: Any,
    ) -> dict[str, Any] | None:
        payload = {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript),
            "cwd": str(self.ws.root),
            "hook_event_name": "Stop",
            "stop_hook_active": active,
            "permission_mode": "default",
            **extra,
        }
        if text is not None:
            payload["last_assistant_message"] = text
        done = self.run("hook", "stop", input=raw if raw is not None else json.dumps(payload))
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) <= 1, done.stdout  # one JSON object or nothing, never a traceback
        return json.loads(lines[0]) if lines else None

    def run(self, *args: str, input: str = "") -> subprocess.CompletedProcess[str]:
        if self.subprocess:
            return run_loopdeck(*args, cwd=self.ws.root, env=self.env, input=input)
        argv = ["-C", str(self.ws.root), *args] if args[0] != "hook" else list(args)
        with mock.patch.dict(os.environ, self.env):
            return in_process(argv, input)

    def loopdeck(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(*args)

    def state(self) -> Any:
        return StateStore(self.ws).read()

    def kinds(self) -> list[str]:
        return [e.kind for e in Journal(self.ws.journal).tail(10_000).events]


def tick_all(path: Path) -> None:
    path.write_text(path.read_text().replace("- [ ]", "- [x]"))


def test_a_whole_session(ws: Workspace, env: dict[str, str]) -> None:
    todo = ws.root / "TODO.md"
    todo.write_text("# Plan\n- [ ] model\n- [ ] routes\n- [ ] tests\n")
    session = Session(ws, env, subprocess=True)
    started = session.loopdeck("start", "Build the todo API", "--task-file", "TODO.md", "--no-github")
    assert started.returncode == 0, started.stderr
    for n in (1, 2, 3):
        out = session.stop(active=n > 1)
        assert out is not None and out["decision"] == "block"
        assert out["systemMessage"] == f"Orchestrator iteration {n}/100 | 3 pending tasks across 1 source"
        assert "line 2: model" in out["reason"]
        assert session.state().iteration == n
    tick_all(todo)
    for n in (1, 2, 3, 4):
        out = session.stop()
        assert out is not None and out["decision"] == "block"
        assert out["reason"].startswith(f"VERIFICATION LOOP {n} of 4")
    final = session.stop("Reviewed four times; nothing left.")
    assert final is not None and "decision" not in final
    assert "loop complete after 7 iterations" in final["systemMessage"]
    assert not ws.state.exists()
    (folder,) = list(ws.archive_dir.iterdir())
    archived = (folder / "state.md").read_text()
    assert 'status: "completed"' in archived and "Build the todo API" in archived
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["outcome"] == "completed" and summary["iterations"] == 7
    assert summary["reason"] == "all sources empty and verified"
    assert summary["sources"][2] == {
        "name": "task_file",
        "enabled": True,
        "available": True,
        "pending": 0,
        "in_progress": 0,
        "done": 3,
    }
    kinds = session.kinds()
    assert kinds.count("blocked") == 7 and kinds.count("verification-loop") == 4
    assert kinds[:4] == ["loop-started", "session-bound", "progress", "blocked"]
    assert kinds.count("progress") == 8  # one per judged Stop, the last (completing) one too
    assert kinds[-3:] == ["completed", "allowed", "archived"]
    assert "completed" in session.loopdeck("status").stdout  # "last loop: completed …"
    # A Stop after the loop ended: no state, silent allow.
    assert session.stop() is None


def test_max_iterations_escalates_and_never_allows(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] hard task\n")
    session = Session(ws, env)
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--max-iterations", "2", "--no-github")
    outs = [session.stop() for _ in range(4)]
    assert all(o is not None and o["decision"] == "block" for o in outs)
    heads = [o["reason"].split("\n")[0] for o in outs if o]
    assert heads[2:] == ["ORCHESTRATOR ESCALATION - ITERATION THRESHOLD REACHED"] * 2
    assert heads[:2] == ["ORCHESTRATOR CONTINUATION - DO NOT STOP"] * 2
    assert session.kinds().count("escalation") == 1


def test_pause_between_stops(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    session = Session(ws, env)
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    assert (session.stop() or {})["decision"] == "block"
    paused = session.loopdeck("pause", "--reason", "coffee")
    assert paused.returncode == 0 and "next Stop" in paused.stdout
    out = session.stop()
    assert out is not None and "decision" not in out and "paused" in out["systemMessage"]
    assert session.state().status == "paused" and session.state().iteration == 1
    assert session.stop() is not None and session.state().iteration == 1  # stays paused
    session.loopdeck("resume")
    out = session.stop()
    assert out is not None and out["decision"] == "block" and session.state().iteration == 2
    waited = session.loopdeck("skip", "--wait", "0.5")
    assert waited.returncode == 1  # nothing applies it until the next Stop: reported, not hung
    session.stop()
    assert "- [-] a" in (ws.root / "TODO.md").read_text()
    assert "task-skipped" in session.kinds()


def test_stop_and_complete_commands(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    session = Session(ws, env)
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    session.loopdeck("complete", "--reason", "shipping as is")
    out = session.stop()
    assert out is not None and "decision" not in out and "forced by user" in out["systemMessage"]
    (folder,) = list(ws.archive_dir.iterdir())
    assert json.loads((folder / "summary.json").read_text())["note"] == "shipping as is"
    session.loopdeck("start", "y", "--task-file", "TODO.md", "--no-github")
    session.loopdeck("stop")
    assert session.stop() is None or session.state().status == "stopped"
    assert session.state().status == "stopped"


def test_real_transcripts_as_hook_input(ws: Workspace, env: dict[str, str], tmp_path: Path) -> None:
    session = Session(ws, env, session_id="1af7fc5e-8455-4414-9ccd-011d40f70b2a")
    session.transcript = tmp_path / "t.jsonl"
    lines = LARGE.read_bytes().splitlines(keepends=True)
    session.transcript.write_bytes(b"".join(lines[:41]))  # TodoWrite: 1 pending, 2 in progress
    session.loopdeck("start", "Document the project", "--no-github")
    out = session.stop(text=None)  # no last_assistant_message: read from the transcript tail
    assert out is not None and out["decision"] == "block"
    assert out["systemMessage"] == "Orchestrator iteration 1/100 | 3 pending tasks across 1 source"
    assert "- TODO list: 1 pending, 2 in progress" in out["reason"]
    session.transcript.write_bytes(SMALL.read_bytes())  # every todo completed
    out = session.stop(text=None)
    assert out is not None and out["reason"].startswith("VERIFICATION LOOP 1 of 4")
    assert session.state().transcript_path == str(session.transcript)


def test_completion_read_from_the_transcript_tail(ws: Workspace, env: dict[str, str]) -> None:
    session = Session(ws, env)
    session.loopdeck("start", "x", "--no-github")
    text = {
        "type": "assistant",
        "message": {"id": "m", "content": [{"type": "text", "text": "ALL_TASKS_COMPLETE"}]},
    }
    call = {
        "type": "assistant",
        "message": {"id": "m", "content": [{"type": "tool_use", "name": "Bash", "input": {}}]},
    }
    session.transcript.write_text(json.dumps(text) + "\n" + json.dumps(call) + "\n")
    out = session.stop(text=None)
    assert out is not None and "loop complete" in out["systemMessage"]


def test_other_sessions_are_let_through_untouched(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    mine = Session(ws, env, "mine")
    mine.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    mine.stop()
    before = ws.state.read_bytes()
    journal = ws.journal.read_bytes()
    assert Session(ws, env, "someone-else").stop() is None
    assert ws.state.read_bytes() == before and ws.journal.read_bytes() == journal


def test_ralph_loop_coexistence_warning(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    (ws.claude_dir / "ralph-loop.local.md").write_text((SAMPLES / "ralph-loop.local.md").read_text())
    session = Session(ws, env)
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    out = session.stop()
    assert out is not None and "ralph-loop is active too" in out["systemMessage"]


def test_block_cap_is_announced(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    session = Session(ws, {**env, "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "2"})
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    first = session.stop(active=False)
    second = session.stop(active=True)
    assert first is not None and "cap" not in first["systemMessage"]
    assert second is not None and "cap of 2" in second["systemMessage"] and second["decision"] == "block"
    third = session.stop(active=True)  # Claude Code would override it: not counted
    assert third is not None and "decision" not in third and "ended this turn" in third["systemMessage"]
    assert session.state().iteration == 2
    # A tool round restarts Claude Code's count: the next block is delivered, no warning.
    with session.transcript.open("a") as f:
        f.write(json.dumps({"type": "user", "message": {"content": [{"type": "tool_result"}]}}) + "\n")
    fourth = session.stop(active=True)
    assert fourth is not None and fourth["decision"] == "block" and "cap" not in fourth["systemMessage"]


# --- fail-safe -----------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", "not json", "[1, 2]", "\x00\xff", '{"cwd": 5', "null"])
def test_malformed_stdin_fails_safe(ws: Workspace, env: dict[str, str], raw: str) -> None:
    session = Session(ws, env)
    session.loopdeck("start", "x", "--no-github")
    out = session.stop(raw=raw)
    assert out is not None and "decision" not in out
    assert out["systemMessage"].startswith("loopdeck: the Stop hook failed safe and allowed this stop")


def test_a_missing_transcript_leaves_the_other_sources_to_decide(ws: Workspace, env: dict[str, str]) -> None:
    """Regression: with 3 tasks open in the task file, a missing transcript let the agent stop."""
    (ws.root / "TODO.md").write_text("- [ ] a\n- [ ] b\n- [ ] c\n")
    session = Session(ws, env)
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    session.transcript = ws.root / "gone.jsonl"
    out = session.stop(text="Done for now.")
    assert out is not None and out["decision"] == "block"
    assert out["systemMessage"].endswith("3 pending tasks across 1 source")
    assert "error" not in session.kinds()


def test_a_failure_inside_the_hook_fails_safe_and_journals(ws: Workspace, env: dict[str, str]) -> None:
    session = Session(ws, env)
    session.loopdeck("start", "x", "--no-github")
    with mock.patch("loop.core.engine.decide", side_effect=RuntimeError("boom")):
        out = session.stop(text="x")
    assert out is not None and "decision" not in out and "RuntimeError: boom" in out["systemMessage"]
    (error,) = [e for e in Journal(ws.journal).tail(50).events if e.kind == "error"]
    assert "Traceback" in error.data["traceback"]


def test_corrupt_state_fails_safe_and_is_kept(ws: Workspace, env: dict[str, str]) -> None:
    session = Session(ws, env)
    ws.state.write_text("---\niteration: five\nmax_iterations: 3\n---\n")
    before = ws.state.read_bytes()
    out = session.stop()
    assert out is not None and "decision" not in out
    assert f"{ws.state}:2: iteration: expected a whole number" in out["systemMessage"]
    assert ws.state.read_bytes() == before
    assert [e.kind for e in Journal(ws.journal).tail(5).events] == ["error"]


def test_no_loop_no_output(ws: Workspace, env: dict[str, str]) -> None:
    assert Session(ws, env).stop() is None
    assert not ws.journal.exists()


@pytest.mark.parametrize("sample", ["goal-active.jsonl", "goal-met.jsonl", "goal-cleared.jsonl"])
def test_a_claude_code_goal_without_a_loop_is_left_alone(
    ws: Workspace, env: dict[str, str], sample: str
) -> None:
    """Claude Code's own `/goal` (a session-scoped Stop hook of its own, recorded in the
    transcript as `goal_status` lines): with no loopdeck loop here, loopdeck's hook answers
    nothing, whether the goal is active, met or cleared, and writes nothing."""
    session = Session(ws, env)
    session.transcript.write_text((SAMPLES / "real-cli" / sample).read_text())
    assert session.stop("Working on it.", active=True) is None
    assert session.stop("Working on it.", active=False) is None
    assert not ws.journal.exists() and not ws.state.exists()
    from loop.drivers import hook_prompt

    prompt = {"session_id": "sess-1", "cwd": str(ws.root), "hook_event_name": "UserPromptSubmit"}
    assert hook_prompt.handle({**prompt, "prompt": "/goal all tests in test/auth pass"}, {}) is None
    assert not ws.state.exists()


def test_concurrent_stops_never_lose_an_iteration(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    env = {**env, "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "0"}  # as `loopdeck install` sets it
    session = Session(ws, env, subprocess=True)  # real processes racing for the lock
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github", "--max-iterations", "0")
    with ThreadPoolExecutor(max_workers=8) as pool:
        outs = list(pool.map(lambda _: session.stop(), range(16)))
    assert all(o is not None and o["decision"] == "block" for o in outs)
    assert session.state().iteration == 16
    assert sorted(int(o["systemMessage"].split()[2]) for o in outs if o) == list(range(1, 17))


HEAVY = (
    "textual",
    "git",
    "rich",
    "yaml",
    "asyncio",
    "tui",
)
"""What the Stop hook's path must not load: a UI, git, or a parser of formats it does not read.
Plain standard-library modules (typing, dataclasses) are allowed: the hook's goal is to stay flat
in the transcript's size and below ralph-loop's hook, not a count of imports."""


LAUNCHER = REPO / "loop" / "launcher.py"


@pytest.mark.parametrize(
    ("how", "start"),
    [
        # the console script, `loopdeck hook stop` (older installs)
        ([], "sys.argv = ['loopdeck', 'hook', 'stop']\nfrom loop.cli import main\nmain()\n"),
        # the launcher, as `loopdeck install` writes it: isolated
        (
            ["-I"],
            f"sys.argv = [{str(LAUNCHER)!r}, 'stop']\n"
            f"exec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'), {{'__name__': '__main__', "
            f"'__file__': sys.argv[0]}})\n",
        ),
    ],
    ids=["console-script", "launcher"],
)
def test_the_hooks_path_stays_lean(ws: Workspace, env: dict[str, str], how: list[str], start: str) -> None:
    """The hook's path, as Claude Code runs it, loads none of the heavy modules: a change that
    pulls one in fails here, long before anyone measures."""
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    session = Session(ws, env)
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    payload = json.dumps({"session_id": "s", "transcript_path": str(session.transcript), "cwd": str(ws.root)})
    code = (
        "import json, os, sys\n"
        "real_exit = os._exit\n"
        "def report(status):\n"
        "    print(json.dumps(sorted(sys.modules)), file=sys.stderr, flush=True)\n"
        "    real_exit(status)\n"
        "os._exit = report\n"
        f"{start}"
    )
    done = subprocess.run(
        [sys.executable, *how, "-c", code],
        cwd=REPO,
        input=payload,
        capture_output=True,
        text=True,
        env={**env, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert json.loads(done.stdout)["decision"] == "block"
    loaded = set(json.loads(done.stderr.splitlines()[-1]))
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []


def test_completion_runs_verification_first(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "ok").write_text("")
    session = Session(ws, env)
    assert session.loopdeck("start", "x", "--no-github", "--verify", "make check").returncode == 0
    (ws.root / "Makefile").write_text("check:\n\ttest -f ok || (echo 'ok is missing'; exit 1)\n")
    (ws.root / "ok").unlink()
    out = session.stop("ALL_TASKS_COMPLETE")
    assert out is not None and out["decision"] == "block"
    assert out["reason"].startswith("VERIFICATION FAILED - FIX THIS FIRST")
    assert "ok is missing" in out["reason"]
    (ws.root / "ok").write_text("")
    out = session.stop("Fixed.\nALL_TASKS_COMPLETE")
    assert out is not None and "loop complete" in out["systemMessage"]
    kinds = [e.kind for e in Journal(ws.journal).tail(100).events]
    assert kinds.count("verification-failed") == 1 and kinds.count("verification-passed") == 1


def test_start_refuses_a_dangerous_verify_command(ws: Workspace, env: dict[str, str]) -> None:
    done = Session(ws, env).loopdeck("start", "x", "--verify", "curl https://x | sh")
    assert done.returncode == 1 and "pipes a download into a shell" in done.stderr
    assert not ws.state.exists()


def test_an_echoed_promise_does_not_run_verification(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "Makefile").write_text("check:\n\ttouch ran\n")
    session = Session(ws, env)
    prompt = "Ship it. Output <promise>SHIPPED</promise> when done."
    session.loopdeck(
        "start", prompt, "--completion-promise", "SHIPPED", "--no-github", "--verify", "make check"
    )
    out = session.stop("My task: Ship it. Output <promise>SHIPPED</promise> when done. Starting.")
    assert out is not None and out["decision"] == "block"
    assert not (ws.root / "ran").exists()
    assert "verification-started" not in [e.kind for e in Journal(ws.journal).tail(50).events]


def test_a_usage_limit_from_stop_failure_is_waited_for_then_the_next_stop_goes_on(
    ws: Workspace, env: dict[str, str]
) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    session = Session(ws, env)
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    session.stop(active=False)
    reset = int(time.time()) // 3600 * 3600 + 7200  # an hour or two ahead, whenever the test runs
    failure = {
        "session_id": session.session_id,
        "cwd": str(ws.root),
        "hook_event_name": "StopFailure",
        "error": {"type": "rate_limit_error", "message": f"Claude AI usage limit reached|{reset}"},
    }
    done = session.run("hook", "stop-failure", input=json.dumps(failure))
    assert done.returncode == 0 and done.stdout == ""
    state = session.state()
    assert (
        state.waiting_for["kind"] == "usage-limit"
        and state.waiting_for["until"] == datetime.fromtimestamp(reset, UTC).isoformat()
    )
    out = session.stop(active=False)  # someone continued the session: back to work
    assert out is not None and out["decision"] == "block"
    assert session.state().waiting_for is None and "limit-lifted" in session.kinds()


def test_stop_failure_that_is_no_limit_is_journaled(ws: Workspace, env: dict[str, str]) -> None:
    session = Session(ws, env)
    session.loopdeck("start", "x", "--no-github")
    bad = {"session_id": "sess-1", "cwd": str(ws.root), "error": {"message": "overloaded_error"}}
    assert session.run("hook", "stop-failure", input=json.dumps(bad)).returncode == 0
    assert session.state().waiting_for is None
    assert any("overloaded_error" in str(e.data) for e in Journal(ws.journal).tail(20).events)


def test_a_question_waits_for_the_answer_inside_the_stop(ws: Workspace, env: dict[str, str]) -> None:
    import threading

    from loop.store import control

    (ws.root / "TODO.md").write_text("- [ ] a\n")
    session = Session(ws, {**env, "LOOPDECK_QUESTION_WAIT": "60"})
    session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")

    def answer_when_asked() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if "question" in session.kinds():
                control.send(ws, "answer", source="test", reason="Use SQLite", key=person(ws))
                return
            time.sleep(0.05)

    helper = threading.Thread(target=answer_when_asked)
    helper.start()
    out = session.stop("Before I go on: <question>SQLite or Postgres?</question>", active=False)
    helper.join()
    assert out is not None and out["decision"] == "block"
    assert out["reason"].startswith("A PERSON ANSWERED YOUR QUESTION:\nUse SQLite")


def test_an_unanswered_question_lets_the_session_stop_paused(ws: Workspace, env: dict[str, str]) -> None:
    session = Session(ws, {**env, "LOOPDECK_QUESTION_WAIT": "0"})
    session.loopdeck("start", "x", "--no-github")
    out = session.stop("<question>Which one?</question>", active=False)
    assert out is not None and "decision" not in out and "waiting for a person" in out["systemMessage"]
    assert session.state().status == "paused" and session.state().waiting_for["question"] == "Which one?"


def test_the_hook_fails_safe_at_its_deadline(
    ws: Workspace, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from loop.drivers import hook

    session = Session(ws, env)
    session.loopdeck("start", "x", "--no-github")
    monkeypatch.setattr(hook, "DEADLINE_S", 1.0)

    def stuck(*args: object, **kwargs: object) -> None:
        time.sleep(30)

    with mock.patch("loop.core.engine.decide", side_effect=stuck):
        out = session.stop(text="x")
    assert out is not None and "decision" not in out and "deadline" in out["systemMessage"]
    (error,) = [e for e in Journal(ws.journal).tail(50).events if e.kind == "error"]
    assert "deadline" in error.data["message"]


def test_the_hook_drives_no_loop_nobody_here_confirmed(
    ws: Workspace, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop that came with the folder (as if cloned): the session is not adopted, nothing runs,
    nothing reaches the agent; the person reads one line saying how to confirm it."""
    session = Session(ws, env)
    assert session.loopdeck("start", "x", "--no-github", "--verify", "true").returncode == 0
    env["LOOPDECK_TRUST_HOME"] = str(another_machine(tmp_path, monkeypatch))
    out = session.stop("ALL_TASKS_COMPLETE", active=False)
    assert out is not None and "decision" not in out and "reason" not in out
    assert (
        "nobody on this machine confirmed" in out["systemMessage"]
        and "loopdeck trust" in out["systemMessage"]
    )
    assert "verification command: true" in out["systemMessage"] and "prompt: x" in out["systemMessage"]
    assert "verification-started" not in session.kinds()
    state = StateStore(ws).read()
    assert state is not None and state.session_id is None and state.iteration == 0  # not adopted
    assert session.loopdeck("trust", "--yes").returncode == 0
    done = session.stop("ALL_TASKS_COMPLETE", active=False)
    assert done is not None and "decision" not in done and "loop complete" in done["systemMessage"]


# --- refusals: one clear line, never a traceback ---------------------------------------------


def test_a_journal_that_refuses_the_error_still_fails_safe_to_stdout(ws: Workspace, tmp_path: Path) -> None:
    """The fail-safe path journals the error: a journal planted as a symlink refuses it too,
    and the hook must still answer (it once left with a traceback and printed nothing)."""
    from loop.drivers import hook

    outside = tmp_path / "outside.jsonl"
    ws.journal.symlink_to(outside)
    out = hook.fail_safe(RuntimeError("boom"), ws)
    assert (
        out["systemMessage"].startswith("loopdeck: the Stop hook failed safe")
        and "boom" in out["systemMessage"]
    )
    assert not outside.exists()


def test_a_refusal_is_journaled_as_one_line_without_a_traceback(ws: Workspace, env: dict[str, str]) -> None:
    session = Session(ws, env)
    session.loopdeck("start", "x", "--no-github")
    ws.lock.unlink(missing_ok=True)
    ws.lock.symlink_to(ws.root / "elsewhere")
    out = session.stop()
    assert out is not None and "decision" not in out
    assert out["systemMessage"].endswith(
        "orchestrator-loop.lock: is a symlink; loopdeck does not follow symlinks there)"
    )
    (error,) = [e for e in Journal(ws.journal).tail(50).events if e.kind == "error"]
    assert error.data == {"message": out["systemMessage"]}  # no traceback: a refusal, not a bug


def test_the_answer_is_utf8_json_whatever_the_locale(ws: Workspace, env: dict[str, str]) -> None:
    """stdout in an ASCII locale, and an answer holding a lone surrogate (from the hook input):
    one UTF-8 JSON object all the same, never an encoding traceback."""
    from loop.drivers import hook

    raw = io.BytesIO()
    stdout = io.TextIOWrapper(raw, encoding="ascii")
    with (
        mock.patch.object(sys, "stdout", stdout),
        mock.patch.object(hook, "handle", return_value={"systemMessage": "caf\u00e9 \ud800"}),
    ):
        assert hook.main(stdin=io.BytesIO(b"{}"), env={**os.environ, **env}) == 0
    (line,) = raw.getvalue().decode("utf-8").splitlines()
    assert json.loads(line) == {"systemMessage": "caf\u00e9 \ud800"}


def test_a_reader_gone_is_no_traceback(ws: Workspace, env: dict[str, str]) -> None:
    from loop.drivers import hook

    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    with (
        mock.patch.object(sys, "stdout", Gone()),
        mock.patch.object(hook, "handle", return_value={"systemMessage": "x"}),
    ):
        assert hook.main(stdin=io.BytesIO(b"{}"), env={**os.environ, **env}) == 0


def test_a_stop_decision_costs_one_fsync_and_the_backup_is_the_old_state_renamed(
    ws: Workspace, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook's durable write is the state's data, once: the backup is the file it replaces,
    renamed there (the same inode), never a copy written and synced again."""
    (ws.root / "TODO.md").write_text("- [ ] a\n- [ ] b\n")
    session = Session(ws, env)
    started = session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github")
    assert started.returncode == 0, started.stderr
    assert session.stop(active=False) is not None  # the session is bound: the steady state from here
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    for n in (2, 3, 4):
        before = os.stat(ws.state).st_ino
        synced.clear()
        out = session.stop()
        assert out is not None and out["decision"] == "block"
        assert session.state().iteration == n
        assert len(synced) == 1, synced
        assert os.stat(ws.backup).st_ino == before

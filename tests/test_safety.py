"""No task text reaches a shell through `--agent`; loopdeck's files are never written through
symlinks; a FIFO where a file should be is unreadable, never a hang."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loop.processes import agent
from loop.sources import task_file, todos, transcript
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.safeopen import UnsafePath
from loop.store.state import LoopState, StateError, StateStore

NOW = "2026-01-01T00:00:00.000Z"
EVIL = "x$(touch y)`touch z`"


def _run(ws: Workspace, command: str, prompt: str = EVIL) -> agent.Run:
    log = ws.private_dir / "iterations" / "0001.log"
    return agent.run(command, prompt, ws.root, log, timeout=60, interrupt=lambda: None)


@pytest.mark.parametrize(
    "template",
    [
        "sh -c 'echo \"{prompt}\"'",
        "bash -lc 'claude -p {prompt}'",
        "/bin/sh -c {prompt}",
        "env FOO=1 bash -c 'cat {prompt_file}'",
        "timeout 60 zsh -c 'echo hi' zsh 'the task: {prompt}'",
        f"{sys.executable} -c 'print(\"{{prompt}}\")'",
    ],
)
def test_a_template_that_puts_the_prompt_in_shell_code_is_refused(ws: Workspace, template: str) -> None:
    with pytest.raises(agent.AgentCommandRefused, match="inside the code"):
        agent.check_template(template)
    run = _run(ws, template)
    assert run.error is not None and "{prompt" in run.error and run.exit_code is None
    assert not (ws.root / "y").exists() and not (ws.root / "z").exists()


def test_the_prompt_as_a_plain_argument_reaches_the_program_verbatim(ws: Workspace) -> None:
    run = _run(ws, "sh -c 'printf %s \"$1\"' sh {prompt}")
    assert run.ok, run
    assert run.tail == EVIL.encode()
    assert not (ws.root / "y").exists() and not (ws.root / "z").exists()
    code = "import sys; print(open(sys.argv[1]).read())"
    run = _run(ws, f"{sys.executable} -c {json.dumps(code)} {{prompt_file}}")
    assert run.ok and run.tail.strip() == EVIL.encode()


# --- writes never follow symlinks -------------------------------------------------------------


def test_a_symlinked_prompt_file_is_not_overwritten(ws: Workspace, tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    iterations = ws.private_dir / "iterations"
    iterations.mkdir(parents=True)
    (iterations / "0001.prompt.md").symlink_to(precious)
    run = _run(ws, "cat {prompt_file}", prompt="overwritten")
    assert run.error is not None and "symlink" in run.error
    assert precious.read_text() == "keep me\n"


def test_a_symlinked_iteration_log_is_not_written(ws: Workspace, tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    iterations = ws.private_dir / "iterations"
    iterations.mkdir(parents=True)
    (iterations / "0001.log").symlink_to(precious)
    run = _run(ws, "echo overwritten", prompt="p")
    assert run.error is not None and "symlink" in run.error
    assert precious.read_text() == "keep me\n"


WRITERS: dict[str, Callable[[Workspace], Any]] = {
    "journal": lambda ws: Journal(ws.journal).append("warning", 1, {"message": "m"}),
    "control": lambda ws: control.send(ws, "pause"),
    "state": lambda ws: StateStore(ws).write(LoopState.new("p")),
}


@pytest.mark.parametrize("which", sorted(WRITERS))
def test_loopdeck_files_are_not_written_through_symlinks(
    ws: Workspace, tmp_path: Path, which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    target = {"journal": ws.journal, "control": ws.control, "state": ws.state}[which]
    if which == "state":  # the state is replaced by rename: its temp file is what could be aimed
        StateStore(ws).write(LoopState.new("p"))
        link = ws.claude_dir / f".{ws.state.name}.{os.getpid()}.deadbeef.tmp"
        link.symlink_to(precious)
        monkeypatch.setattr(os, "urandom", lambda n: bytes.fromhex("deadbeef")[:n])
        with pytest.raises(UnsafePath):
            WRITERS[which](ws)
    else:
        target.symlink_to(precious)
        with pytest.raises(UnsafePath, match="symlink"):
            WRITERS[which](ws)
    assert precious.read_text() == "keep me\n"


@pytest.mark.parametrize("which", sorted(WRITERS))
def test_a_symlinked_claude_folder_is_refused(tmp_path: Path, which: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "project"
    root.mkdir()
    (root / ".claude").symlink_to(elsewhere)
    with pytest.raises(UnsafePath, match="is a symlink"):
        WRITERS[which](Workspace(root))
    assert list(elsewhere.iterdir()) == []


def test_a_subfolder_resolving_outside_claude_is_refused(ws: Workspace, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws.claude_dir / "loopdeck").symlink_to(elsewhere)
    run = _run(ws, "echo hi", prompt="p")
    assert run.error is not None and "outside" in run.error
    assert list(elsewhere.iterdir()) == []


# --- reads never block ------------------------------------------------------------------------


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """`call()`, failing the test (instead of hanging it) if it takes longer than `seconds`."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked on a FIFO"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "transcript.jsonl"
    os.mkfifo(path)
    return path


def test_a_fifo_transcript_does_not_hang_the_todo_source(fifo: Path) -> None:
    report = _within(10, lambda: todos.check(fifo, NOW, None))
    assert not report.available and "FIFO" in (report.error or "")


def test_a_fifo_transcript_does_not_hang_the_completion_check(fifo: Path) -> None:
    with pytest.raises(OSError, match="FIFO"):
        _within(10, lambda: transcript.last_assistant_text(fifo))


def test_a_fifo_or_folder_task_file_is_unreadable(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "TODO.md")
    report = _within(10, lambda: task_file.check(tmp_path, "TODO.md", NOW))
    assert not report.available and "FIFO" in (report.error or "")


def test_a_fifo_state_file_is_an_error_not_a_hang(ws: Workspace) -> None:
    os.mkfifo(ws.state)
    with pytest.raises(StateError, match="FIFO"):
        _within(10, lambda: StateStore(ws).read())


def test_a_fifo_journal_or_queue_is_an_error_not_a_hang(ws: Workspace) -> None:
    os.mkfifo(ws.journal)
    os.mkfifo(ws.control)
    with pytest.raises(OSError, match="FIFO"):
        _within(10, lambda: Journal(ws.journal).tail(5))
    with pytest.raises(OSError, match="FIFO"):
        _within(10, lambda: control.read_since(ws.control, 0))


def test_run_refuses_a_shell_template_before_the_loop_starts(ws: Workspace) -> None:
    from tests.conftest import run_loopdeck

    done = run_loopdeck(
        "-C", str(ws.root), "run", EVIL, "--agent", "sh -c 'echo {prompt}'", "--no-github", "--headless"
    )
    assert done.returncode == 1 and "inside the code" in done.stderr, done.stderr
    assert not ws.state.exists()
    assert not (ws.root / "y").exists()


def test_a_small_file_read_under_a_large_limit_allocates_what_it_holds(tmp_path: Path) -> None:
    """The monitor reads the state and the task file at every change under limits of tens of
    MB: a read allocates what the file holds, not the limit (each read of a few KB mapped 64 MB,
    and the heap grew with what was left between reads); the limit still cuts a larger file."""
    import tracemalloc

    from loop.store.safeopen import read_regular

    small = tmp_path / "small.md"
    small.write_bytes(b"- [ ] one\n" * 100)
    tracemalloc.start()
    try:
        assert read_regular(small, 64 * 1024 * 1024) == b"- [ ] one\n" * 100
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024
    assert read_regular(small, 25) == b"- [ ] one\n- [ ] one\n- [ ]"
    assert read_regular(small, 1000) == b"- [ ] one\n" * 100
    assert read_regular(small, 1001) == b"- [ ] one\n" * 100
    assert read_regular(small) == b"- [ ] one\n" * 100

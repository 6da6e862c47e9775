"""Neighbour loop formats: each adapter reads its valid file, and every broken file becomes a
problem naming file, line (where one is known) and what was expected, never a traceback."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loop import formats
from loop.formats import FORMATS, detect
from tests.conftest import FIXTURES

FORMAT_FIXTURES = FIXTURES / "formats"
FILES = {
    "ralph-loop": "ralph-loop.local.md",
    "workflow-loop": "workflow-loop-state.json",
    "continuous-session": "continuous-session-state.json",
    "task-loop": "task-loop-state.json",
    "prd-status": "prd-status.json",
    "claude-task-state": "claude-task-state.json",
}
REQUIRED = {
    "ralph-loop": "iteration",
    "workflow-loop": "status",
    "continuous-session": "currentSession",
    "task-loop": "currentIteration",
    "claude-task-state": "currentIteration",
}
"""A field each format cannot do without."""


def place(root: Path, kind: str, data: bytes | None = None) -> Path:
    path = root / FORMATS[kind][0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if data is not None else (FORMAT_FIXTURES / FILES[kind]).read_bytes())
    return path


def test_every_format_has_a_fixture() -> None:
    assert set(FILES) == set(FORMATS)


def test_ralph_loop(tmp_path: Path) -> None:
    found = detect(tmp_path) if place(tmp_path, "ralph-loop") else []
    [item] = found
    assert item.problem is None and item.loop is not None
    view = item.loop
    assert (view.kind, view.status, view.iteration, view.max_iterations) == ("ralph-loop", "running", 1, 20)
    assert view.prompt == "Build a todo API"
    assert view.completion_promise == "DONE"
    assert view.started_at == "2026-11-25T21:13:34Z"
    assert view.session_id == "11111111-2222-3333-4444-555555555555"
    assert view.can_cancel


def test_workflow_loop(tmp_path: Path) -> None:
    place(tmp_path, "workflow-loop")
    [item] = detect(tmp_path)
    assert item.loop is not None
    view = item.loop
    assert (view.status, view.iteration, view.max_iterations) == ("running", 3, 10)
    assert (view.tasks_done, view.tasks_pending) == (2, 3)
    assert view.pending_titles[0] == "Add the storage layer"
    assert not view.can_cancel


def test_continuous_session(tmp_path: Path) -> None:
    place(tmp_path, "continuous-session")
    [item] = detect(tmp_path)
    assert item.loop is not None
    view = item.loop
    assert (view.status, view.iteration, view.max_iterations) == ("paused", 4, 12)
    assert (view.tasks_done, view.tasks_pending) == (3, 3)
    assert view.needs_person
    assert view.updated_at == "2026-01-09T11:20:00Z"


def test_task_loop(tmp_path: Path) -> None:
    place(tmp_path, "task-loop")
    [item] = detect(tmp_path)
    assert item.loop is not None
    view = item.loop
    assert (view.status, view.iteration, view.max_iterations, view.current_task) == (
        "running",
        7,
        30,
        "T-108",
    )
    assert view.tasks_done == 2 and view.tasks_pending is None


def test_prd_status(tmp_path: Path) -> None:
    place(tmp_path, "prd-status")
    [item] = detect(tmp_path)
    assert item.loop is not None
    assert (item.loop.tasks_done, item.loop.tasks_pending) == (2, 2)
    assert item.loop.current_task == "Sign in"


def test_prd_status_as_a_map(tmp_path: Path) -> None:
    place(tmp_path, "prd-status", json.dumps({"US-1": True, "US-2": "passed", "US-3": False}).encode())
    [item] = detect(tmp_path)
    assert item.loop is not None
    assert (item.loop.tasks_done, item.loop.tasks_pending, item.loop.status) == (2, 1, "running")


def test_claude_task_state(tmp_path: Path) -> None:
    place(tmp_path, "claude-task-state")
    [item] = detect(tmp_path)
    assert item.loop is not None
    view = item.loop
    assert (view.status, view.iteration, view.max_iterations) == ("running", 6, 25)
    assert view.completion_promise == "API_COMPLETE"
    assert view.prompt.startswith("Implement the API")


def test_several_in_one_folder(tmp_path: Path) -> None:
    for kind in FORMATS:
        place(tmp_path, kind)
    found = detect(tmp_path)
    assert [f.kind for f in found] == list(FORMATS)
    assert all(f.problem is None for f in found)


def test_nothing_found_in_an_empty_folder(tmp_path: Path) -> None:
    assert detect(tmp_path) == []


def _broken(kind: str) -> dict[str, bytes]:
    good = (FORMAT_FIXTURES / FILES[kind]).read_bytes()
    variants = {
        "truncated": good[: len(good) // 2],
        "binary": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "latin-1": good.replace(b"\n", "\n# caf\xe9\n".encode("latin-1"), 1)
        if kind == "ralph-loop"
        else b'{"status": "caf\xe9"}',
        "empty": b"",
        "huge line": b'{"status": "' + b"x" * (5 * 1024 * 1024) + b'"}',
    }
    if kind != "ralph-loop":
        data = json.loads(good)
        variants["a list"] = b"[1, 2]"
        field = REQUIRED.get(kind)
        if field is not None:
            missing = {k: v for k, v in data.items() if k != field}
            variants["missing field"] = json.dumps(missing, indent=2).encode()
            wrong = {**data, field: "seven" if field != "status" else 7}
            variants["wrong type"] = json.dumps(wrong, indent=2).encode()
        else:
            variants["wrong type"] = json.dumps({"stories": "all of them"}).encode()
            variants["missing field"] = json.dumps({}).encode()
    else:
        text = good.decode()
        variants["missing field"] = text.replace("iteration: 1\n", "").encode()
        variants["wrong type"] = text.replace("iteration: 1", "iteration: one").encode()
        variants["no closing line"] = text.replace("---\n\nBuild", "\nBuild").encode()
        variants["bad yaml"] = text.replace("max_iterations: 20", "max_iterations: [20").encode()
    return variants


CASES = [(kind, name) for kind in FILES for name in _broken(kind)]


@pytest.mark.parametrize(("kind", "variant"), CASES, ids=[f"{k}-{v}" for k, v in CASES])
def test_broken_files_are_problems_not_tracebacks(tmp_path: Path, kind: str, variant: str) -> None:
    path = place(tmp_path, kind, _broken(kind)[variant])
    [item] = detect(tmp_path)
    assert item.loop is None, variant
    assert item.problem is not None
    assert item.problem.path == path
    message = str(item.problem)
    assert str(path) in message
    assert len(message) < 400, "a problem is a sentence, not the file"
    as_json = item.to_json()
    assert as_json["status"] == "unreadable" and as_json["error"]["problem"]


def test_problems_say_where_and_what(tmp_path: Path) -> None:
    good = json.loads((FORMAT_FIXTURES / FILES["task-loop"]).read_text())
    place(tmp_path, "task-loop", json.dumps({**good, "currentIteration": "7"}, indent=2).encode())
    [item] = detect(tmp_path)
    assert item.problem is not None
    assert item.problem.line == 6
    assert item.problem.problem == '"currentIteration" should be a whole number, found the text "7"'

    place(tmp_path, "task-loop", b'{\n  "status": "running",\n  "currentIteration": 3,\n')
    [item] = detect(tmp_path)
    assert item.problem is not None and item.problem.line == 4
    assert "ends early" in item.problem.problem

    place(tmp_path, "task-loop", json.dumps({**good, "status": "sleeping"}).encode())
    [item] = detect(tmp_path)
    assert item.problem is not None
    assert "expected one of running, paused, stopping, complete, failed" in item.problem.problem

    place(tmp_path, "task-loop", b'{"status": "running"}\x00\x00')
    [item] = detect(tmp_path)
    assert item.problem is not None and "binary" in item.problem.problem and item.problem.line == 1


def test_ralph_problems_name_the_line(tmp_path: Path) -> None:
    text = (FORMAT_FIXTURES / FILES["ralph-loop"]).read_text()
    place(tmp_path, "ralph-loop", text.replace("iteration: 1", "iteration: one").encode())
    [item] = detect(tmp_path)
    assert item.problem is not None
    assert item.problem.line == 3
    assert item.problem.problem.startswith("`iteration` should be a whole number")


def test_an_inactive_ralph_loop_is_stopped(tmp_path: Path) -> None:
    text = (FORMAT_FIXTURES / FILES["ralph-loop"]).read_text()
    place(tmp_path, "ralph-loop", text.replace("active: true", "active: false").encode())
    [item] = detect(tmp_path)
    assert item.loop is not None and item.loop.status == "stopped"


def test_cancel_a_ralph_loop_keeps_a_copy(tmp_path: Path) -> None:
    from loop.core.errors import FileProblem
    from loop.formats import ralph

    path = place(tmp_path, "ralph-loop")
    kept = ralph.cancel(tmp_path, datetime(2026, 1, 9, 11, 42, 7, tzinfo=UTC))
    assert not path.exists()
    assert kept == tmp_path / ".claude" / "loops" / "20260109T114207Z-ralph-loop" / "ralph-loop.local.md"
    assert kept.read_bytes() == (FORMAT_FIXTURES / FILES["ralph-loop"]).read_bytes()
    with pytest.raises(FileProblem, match="no ralph loop to cancel"):
        ralph.cancel(tmp_path, datetime(2026, 1, 9, 11, 42, 8, tzinfo=UTC))


def test_loops_json_lists_ours_first(tmp_path: Path) -> None:
    place(tmp_path, "ralph-loop")
    loops = formats.loops_json({"kind": "orchestrator-loop"}, detect(tmp_path))
    assert [loop["kind"] for loop in loops] == ["orchestrator-loop", "ralph-loop"]
    assert loops[1]["iteration"] == 1


def test_a_huge_line_within_the_limit_is_read(tmp_path: Path) -> None:
    text = (FORMAT_FIXTURES / FILES["ralph-loop"]).read_text()
    prompt = "Build it. " * 200_000  # a 2 MB prompt on one line
    place(tmp_path, "ralph-loop", text.replace("Build a todo API", prompt).encode())
    [item] = detect(tmp_path)
    assert item.loop is not None and len(item.loop.prompt) == len(prompt.strip())


# --- Claude Code's own /goal, read from the session transcript ---------------------------------

GOALS = FIXTURES / "samples" / "real-cli"


def goal_session(
    root: Path, home: Path, sample: str, session: str = "8abee56f-9e57-4678-881c-bee368277255"
) -> Path:
    """A Claude Code session of `root` whose transcript is a real /goal sample."""
    from loop.formats.claude_goal import project_folder

    folder = project_folder(root)
    assert folder.parent == home / "projects"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    path.write_text((GOALS / sample).read_text())
    return path


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "claude-home"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home


def test_an_active_claude_code_goal_is_a_neighbour(tmp_path: Path, claude_home: Path) -> None:
    root = tmp_path / "my.project"
    root.mkdir()
    path = goal_session(root, claude_home, "goal-active.jsonl")
    from loop.formats.claude_goal import project_folder

    assert (
        project_folder(Path("/home/u/my.project_x")).name == "-home-u-my-project-x"
    )  # as Claude Code names it
    assert path.parent == project_folder(root)
    (found,) = detect(root)
    assert found.kind == "claude-goal" and found.loop is not None
    assert found.loop.status == "running" and found.loop.prompt == "an impossible thing"
    assert found.loop.iteration == 9 and found.loop.current_task == "last check: never"
    assert found.loop.session_id == "8abee56f-9e57-4678-881c-bee368277255" and not found.loop.can_cancel
    assert formats.read("claude-goal", path).loop == found.loop


@pytest.mark.parametrize(
    ("sample", "status"), [("goal-met.jsonl", "completed"), ("goal-cleared.jsonl", "stopped")]
)
def test_a_goal_met_or_cleared_is_not_listed(
    tmp_path: Path, claude_home: Path, sample: str, status: str
) -> None:
    path = goal_session(tmp_path, claude_home, sample)
    assert detect(tmp_path) == []
    found = formats.read("claude-goal", path)
    assert found.loop is not None and found.loop.status == status


def test_the_newest_session_decides(tmp_path: Path, claude_home: Path) -> None:
    import os

    old = goal_session(tmp_path, claude_home, "goal-active.jsonl", "old")
    new = goal_session(tmp_path, claude_home, "goal-met.jsonl", "new")
    os.utime(old, (1_000_000, 1_000_000))
    assert detect(tmp_path) == []
    os.utime(new, (900_000, 900_000))
    assert [f.kind for f in detect(tmp_path)] == ["claude-goal"]


def test_only_a_transcripts_end_is_read(tmp_path: Path, claude_home: Path) -> None:
    from loop.formats.claude_goal import TAIL_BYTES

    path = goal_session(tmp_path, claude_home, "goal-active.jsonl")
    with path.open("a") as out:
        filler = json.dumps({"type": "assistant", "message": {"content": "x" * 1000}})
        out.write((filler + "\n") * (TAIL_BYTES // 1000 + 10))
    assert detect(tmp_path) == []
    problem = formats.read("claude-goal", path).problem
    assert problem is not None and "no /goal status" in str(problem)


def test_broken_transcripts_and_folders_do_not_break_detection(tmp_path: Path, claude_home: Path) -> None:
    from loop.formats.claude_goal import project_folder

    folder = project_folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / "weird.jsonl").mkdir()  # a folder with the name of a transcript
    (folder / "broken.jsonl").write_bytes(
        b'{"type":"attachment","attachment":{"type":"goal_status","met":false\n\xff\xfe goal_status [1,2]\n'
    )
    assert detect(tmp_path) == []
    (folder / "broken.jsonl").write_text(
        json.dumps(
            {"type": "attachment", "attachment": {"type": "goal_status", "met": False, "condition": 5}}
        )
        + "\n"
    )
    (found,) = detect(tmp_path)
    assert found.loop is not None and found.loop.prompt == "" and found.loop.status == "running"


def test_status_lists_the_goal_read_only(tmp_path: Path, claude_home: Path) -> None:
    from loop.store.paths import Workspace
    from loop.views.status_text import render

    goal_session(tmp_path, claude_home, "goal-active.jsonl")
    code, lines, _errors = render(Workspace(tmp_path))
    assert code == 0 and lines[0].startswith("claude-goal") and "(read-only)" in lines[0]
    assert "running (iteration 9)" in lines[0]

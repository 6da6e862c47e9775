"""A restore only ever brings back the same loop, and a state rebuilt from the journal keeps
the loop's prompt, task file and checks."""

from __future__ import annotations

import json

import pytest

from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore

CORRUPTIONS = {
    "a line that is no YAML": "---\niteration: [\n---\n",
    "garbage": "\x00\x01 not a state at all",
    "empty": "",
}


def finish_loop_a(ws: Workspace, cli) -> str:
    """Loop A runs a little (so a backup exists), then completes (archived)."""
    (ws.root / "A.md").write_text("- [ ] a1\n")
    assert cli("start", "Loop A", "--task-file", "A.md", "--no-github", "--no-tasks").code == 0
    assert cli("pause").code == 0
    st = StateStore(ws).read()
    assert st is not None
    st.iteration = 3
    StateStore(ws).write(st)  # the backup now holds loop A
    kept = ws.backup.read_bytes()
    assert cli("complete").code == 0
    from tests.test_hook import Session

    Session(ws, {}).stop()  # the forced completion is applied: A is archived, its backup too
    assert not ws.state.exists() and not ws.backup.exists()
    ws.backup.write_bytes(kept)  # as an older loopdeck left it
    return st.started_at


def start_loop_b(ws: Workspace, cli) -> str:
    """Loop B starts (a second later: loops are told apart by when they started)."""
    from loop.core.model import LoopState

    (ws.root / "B.md").write_text("- [ ] b1\n- [ ] b2\n")
    started = LoopState.new("x").started_at
    args = ["start", "Loop B: the whole prompt, " + "long " * 100, "--task-file", "B.md", "--no-github"]
    ran = cli(*args, "--verify", "python3 -m pytest -q", "--max-iterations", "7", "--no-tasks")
    assert ran.code == 0, ran.err
    st = StateStore(ws).read()
    assert st is not None
    return st.started_at or started


def archived(ws: Workspace) -> list[str]:
    return sorted(json.loads((f / "summary.json").read_text())["prompt"] for f in ws.archive_dir.iterdir())


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_the_backup_of_a_finished_loop_is_never_restored_over_a_new_one(
    ws: Workspace, cli, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    a_started = finish_loop_a(ws, cli)
    monkeypatch.setattr("loop.core.model.LoopState.new", _later(a_started))
    b_started = start_loop_b(ws, cli)
    assert b_started != a_started
    ws.state.write_text(CORRUPTIONS[corruption])
    before = ws.state.read_bytes()
    ran = cli("restore")
    assert ran.code == 1 and "earlier loop" in ran.err and "--from journal" in ran.err, ran.err
    assert ws.state.read_bytes() == before  # nothing written, nothing moved
    assert archived(ws) == ["Loop A"]
    # resume does not offer it either: B is rebuilt from the journal, A stays archived once
    ran = cli("resume", "--yes")
    assert ran.code == 0, ran.err + ran.out
    assert "rebuilt from the journal" in ran.out and "earlier loop" in ran.out
    st = StateStore(ws).read()
    assert st is not None and st.started_at == b_started
    assert st.prompt.startswith("Loop B") and st.task_path == "B.md"
    assert archived(ws) == ["Loop A"]
    kinds = [e.kind for e in Journal(ws.journal).tail(10_000).events]
    assert kinds.count("archived") == 1


def test_the_backup_of_a_loop_start_force_replaced_is_never_restored(
    ws: Workspace, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("start", "Loop A", "--no-github", "--no-tasks").code == 0
    st = StateStore(ws).read()
    assert st is not None
    monkeypatch.setattr("loop.core.model.LoopState.new", _later(st.started_at))
    assert cli("start", "Loop B", "--force", "--no-github", "--no-tasks").code == 0
    assert ws.backup.exists()  # A's last state, kept by the write that replaced it
    ws.state.write_text(CORRUPTIONS["a line that is no YAML"])
    ran = cli("restore")
    assert ran.code == 1 and "earlier loop" in ran.err


def test_the_same_loops_backup_is_still_restored(ws: Workspace, cli) -> None:
    assert cli("start", "Loop A", "--no-github", "--no-tasks").code == 0
    st = StateStore(ws).read()
    assert st is not None
    st.iteration = 4
    StateStore(ws).write(st)
    st.iteration = 5
    StateStore(ws).write(st)
    ws.state.write_text("---\niteration: [\n---\n")
    ran = cli("restore")
    assert ran.code == 0, ran.err
    restored = StateStore(ws).read()
    assert restored is not None and restored.iteration == 4 and restored.prompt == "Loop A"


def test_a_state_rebuilt_from_the_journal_keeps_the_prompt_task_file_and_checks(ws: Workspace, cli) -> None:
    """No backup to lean on (the loop's first write was its only one): the journal's record of
    its start is enough."""
    (ws.root / "B.md").write_text("- [ ] b1\n- [ ] b2\n")
    prompt = "Loop B: the whole prompt, " + "long " * 100
    ran = cli(
        *["start", prompt, "--task-file", "B.md", "--no-github", "--no-tasks"],
        *["--verify", "python3 -m pytest -q", "--max-iterations", "7", "--completion-promise", "SHIPPED"],
    )
    assert ran.code == 0, ran.err
    assert not ws.backup.exists()
    ws.state.write_text("---\niteration: [\n---\n")
    ran = cli("resume", "--yes", "--from", "journal")
    assert ran.code == 0, ran.err
    assert "from the journal (the loop's start)" in ran.out
    st = StateStore(ws).read()
    assert st is not None
    assert st.prompt == prompt.strip()
    assert st.task_path == "B.md" and st.verify == ["python3 -m pytest -q"]
    assert st.max_iterations == 7 and st.promise == "SHIPPED"
    assert st.check_tasks is False and st.check_github is False
    status = cli("status", "--json")
    assert status.code == 0, status.err
    assert json.loads(status.out)["pending_total"] == 2


def _later(after: str):
    """`LoopState.new`, dated a second after `after` (two loops started in one second share a
    start time; real ones are minutes apart)."""
    from datetime import datetime, timedelta

    from loop.core.model import LoopState

    real = LoopState.new.__func__  # type: ignore[attr-defined]
    when = (datetime.fromisoformat(after) + timedelta(seconds=1)).isoformat()

    def new(cls, /, prompt: str, **values):
        values.setdefault("started_at", when)
        return real(cls, prompt, **values)

    return classmethod(new)


def test_when_the_corrupt_file_cannot_say_which_loop_it_was_the_journal_does(ws: Workspace, cli) -> None:
    assert cli("start", "Loop A", "--no-github", "--no-tasks").code == 0
    st = StateStore(ws).read()
    assert st is not None
    StateStore(ws).write(st)
    ws.state.write_text("garbage")
    assert cli("restore").code == 0

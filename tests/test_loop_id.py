"""A loop is known by its id, not by the second it started: two loops started in the same second
never take each other's backup, archive or iteration logs."""

from __future__ import annotations

import json
import re

from loop.core.model import LoopState
from loop.store.archive import archive, folder_name, latest
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore, parse
from tests.conftest import run_loopdeck


def loopdeck(ws: Workspace, *args: str) -> tuple[int, str]:
    """The real CLI, in its own process."""
    done = run_loopdeck("-C", str(ws.root), *args)
    return done.returncode, done.stdout + done.stderr


def archived(ws: Workspace) -> list[str]:
    return sorted(json.loads((f / "summary.json").read_text())["prompt"] for f in ws.archive_dir.iterdir())


def test_a_loop_started_in_the_second_another_completed_never_gets_its_backup(ws: Workspace) -> None:
    from tests.test_hook import Session

    code, out = loopdeck(ws, "start", "Loop A", "--no-github", "--no-tasks")
    assert code == 0, out
    a = StateStore(ws).read()
    assert a is not None and re.fullmatch(r"[0-9a-f]{12}", a.loop_id)
    a.iteration = 3
    StateStore(ws).write(a)  # the backup now holds loop A
    kept = ws.backup.read_bytes()
    code, out = loopdeck(ws, "complete")
    assert code == 0, out
    Session(ws, {}, subprocess=True).stop()  # the completion is applied: A is archived, its backup too
    assert not ws.state.exists() and not ws.backup.exists()
    ws.backup.write_bytes(kept)  # as an older loopdeck left it
    assert archived(ws) == ["Loop A"]

    code, out = loopdeck(ws, "start", "Loop B", "--no-github", "--no-tasks")  # right after
    assert code == 0, out
    b = StateStore(ws).read()
    assert b is not None and b.loop_id and b.loop_id != a.loop_id
    if b.started_at != a.started_at:  # the second turned between them: A's backup says B's
        text = ws.backup.read_text()
        ws.backup.write_text(text.replace(f'started_at: "{a.started_at}"', f'started_at: "{b.started_at}"'))
    backup = StateStore(ws).read_backup()
    assert backup is not None and backup.started_at == b.started_at and backup.prompt == "Loop A"

    ws.state.write_text("garbage")  # B's state is corrupt: nothing in it says which loop it was
    before = ws.state.read_bytes()
    code, out = loopdeck(ws, "restore")
    assert code == 1 and "earlier loop" in out, out
    assert ws.state.read_bytes() == before  # nothing written, nothing moved

    code, out = loopdeck(ws, "resume", "--yes")
    assert code == 0, out
    assert "rebuilt from the journal" in out and "earlier loop" in out, out
    st = StateStore(ws).read()
    assert st is not None and st.prompt == "Loop B" and st.loop_id == b.loop_id and st.iteration == 0
    assert archived(ws) == ["Loop A"]
    kinds = [e.kind for e in Journal(ws.journal).tail(10_000).events]
    assert kinds.count("archived") == 1

    code, out = loopdeck(ws, "status", "--json")
    assert code == 0, out
    assert json.loads(out)["loop"]["loop_id"] == b.loop_id


def test_the_archive_and_the_logs_are_named_by_the_id(ws: Workspace) -> None:
    first = LoopState.new("A", started_at="2026-03-01T08:00:00+00:00")
    second = LoopState.new("B", started_at="2026-03-01T08:00:00+00:00")
    assert ws.iteration_logs(first.started_at, first.loop_id) != ws.iteration_logs(
        second.started_at, second.loop_id
    )
    a = archive(ws, first, "completed")
    b = archive(ws, second, "stopped")
    assert a.name == f"{folder_name(first.started_at)}-{first.loop_id}"
    assert b.name == f"{folder_name(second.started_at)}-{second.loop_id}.2"  # the second of that second
    assert latest(ws) == b
    assert archive(ws, second, "stopped", reuse=True) == b  # its next ending, in its own folder


def test_a_state_from_before_loops_had_ids_keeps_its_names(ws: Workspace) -> None:
    from tests.conftest import SEED_STATE

    old = parse(SEED_STATE.encode(), ws.state)
    assert old.loop_id == ""
    assert ws.iteration_logs(old.started_at, old.loop_id).name == "2026-01-09T10-30-00+00-00"
    folder = archive(ws, old, "completed")
    assert folder.name == "2026-01-09T10-30-00+00-00"
    newer = archive(ws, LoopState.new("B", started_at="2026-01-09T10:30:00+00:00"), "stopped")
    assert newer.name.endswith(".2") and latest(ws) == newer
    assert "loop_id" not in json.loads((folder / "summary.json").read_text())

"""Snapshots read one after another: each reads only what changed since the last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loop.sources import task_file
from loop.store import state as state_module
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.views.snapshot import Reader, read
from tools import screenshots


def _running(tmp_path: Path) -> Workspace:
    ws = screenshots.SCENARIOS["running"](tmp_path / "running")
    assert isinstance(ws, Workspace)
    return ws


def test_a_reader_reads_again_only_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _running(tmp_path)
    reader = Reader(ws)
    first = reader.read()
    assert first.loop is not None and first.events

    parsed: list[str] = []
    real_parse, real_checklist = state_module.parse, task_file.parse

    def parse_state(data: bytes, path: Path) -> Any:
        parsed.append("state")
        return real_parse(data, path)

    def parse_tasks(text: str) -> Any:
        parsed.append("tasks")
        return real_checklist(text)

    monkeypatch.setattr(state_module, "parse", parse_state)
    monkeypatch.setattr(task_file, "parse", parse_tasks)

    def backwards(*args: object, **kwargs: object) -> Any:
        raise AssertionError("the journal's tail was read again")

    monkeypatch.setattr("loop.store.journal.lines_backwards", backwards)
    again = reader.read()
    assert parsed == []  # nothing changed: nothing parsed
    assert again.events is first.events and again.loop == first.loop

    Journal(ws.journal).append("warning", 12, {"message": "one more line"})
    store = StateStore(ws)
    with store.locked():
        state = store.read()
        assert state is not None
        state.iteration += 1
        store.write(state)
    parsed.clear()
    third = reader.read()
    assert third.events[-1].data["message"] == "one more line"
    assert third.loop is not None and third.loop.iteration == first.loop.iteration + 1
    assert parsed == ["state"]  # the state once; the task file did not change


def test_a_reader_sees_what_a_fresh_read_sees(tmp_path: Path) -> None:
    ws = _running(tmp_path)
    reader = Reader(ws)
    reader.read()
    Journal(ws.journal).append("verification-passed", 12, {"command": "pytest -q", "exit_code": 0})
    todo = ws.root / "TODO.md"
    todo.write_text(todo.read_text().replace("- [ ]", "- [x]", 1))
    kept, fresh = reader.read(), read(ws)
    assert kept.events == fresh.events
    assert kept.verifications == fresh.verifications and kept.durations == fresh.durations
    assert kept.sources is not None and fresh.sources is not None
    assert kept.sources.pending_total == fresh.sources.pending_total
    ws.state.write_bytes(b"\x00 not a state")
    assert reader.read().error is not None and reader.read().error == read(ws).error
    ws.state.unlink()
    assert reader.read().loop is None

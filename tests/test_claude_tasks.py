from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loop.sources import claude_tasks
from tests.conftest import SAMPLES

NOW = "2026-01-01T00:00:00.000Z"
SESSION = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"


def make_list(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for sample in ("task-pending.json", "task-in-progress.json", "task-completed.json"):
        shutil.copy(SAMPLES / sample, folder / f"{json.loads((SAMPLES / sample).read_text())['id']}.json")
    return folder


@pytest.fixture(autouse=True)
def no_shared_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAUDE_CODE_TASK_LIST_ID", raising=False)


def test_samples_by_full_session_id(tmp_path: Path) -> None:
    make_list(tmp_path, SESSION)
    report = claude_tasks.check(tmp_path, SESSION, NOW)
    assert (report.pending, report.in_progress, report.done) == (1, 1, 1)
    by_id = {i.id: i for i in report.items}
    assert by_id["2"].blocked_by == ("1",) and by_id["2"].status == "in_progress"
    assert by_id["3"].title == "Write tests" and by_id["3"].blocked_by == ("2",)
    assert [i.id for i in report.items] == ["1", "2", "3"]


def test_session_prefix_list_and_shared_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_list(tmp_path, f"session-{SESSION[:8]}")
    assert claude_tasks.check(tmp_path, SESSION, NOW).open_count == 2
    make_list(tmp_path, "team")
    (tmp_path / "team" / "9.json").write_text(json.dumps({"id": "9", "subject": "x", "status": "pending"}))
    monkeypatch.setenv("CLAUDE_CODE_TASK_LIST_ID", "team")
    assert claude_tasks.check(tmp_path, SESSION, NOW).open_count == 3


def test_tolerates_other_files_missing_keys_deleted_and_garbage(tmp_path: Path) -> None:
    folder = make_list(tmp_path, SESSION)
    (folder / ".lock").write_text("")
    (folder / "notes.txt").write_text("hello")
    (folder / "4.json").write_text(json.dumps({"id": "4", "status": "deleted", "subject": "gone"}))
    (folder / "5.json").write_text(json.dumps({"subject": "no status or id"}))
    (folder / "6.json").write_bytes(b'{"id": "6", "status": "pend')  # mid-write
    (folder / "7.json").write_text("[1, 2]")
    (folder / "8.json").write_text(
        json.dumps(
            {
                "id": "8",
                "subject": "parallel",
                "status": "pending",
                "owner": "worker-2",
                "blockedBy": "not a list",
                "metadata": {"target_files": ["src/a.py", 3, None]},
            }
        )
    )
    (folder / "10.json").write_text(json.dumps({"id": 10, "status": 7, "subject": None}))
    report = claude_tasks.check(tmp_path, SESSION, NOW)
    assert (report.pending, report.in_progress, report.done) == (4, 1, 1)
    assert len(report.warnings) == 2
    by_id = {i.id: i for i in report.items}
    assert "4" not in by_id
    assert by_id["8"].owner == "worker-2" and by_id["8"].target_files == ("src/a.py", "3")
    assert by_id["8"].blocked_by == ()
    assert by_id["5"].title == "no status or id" and by_id["5"].id == "5"


def test_no_list_is_nothing_pending(tmp_path: Path) -> None:
    report = claude_tasks.check(tmp_path, SESSION, NOW)
    assert report.available and report.open_count == 0 and "no task list" in (report.detail or "")
    assert claude_tasks.check(tmp_path, None, NOW).available


def test_list_that_is_a_file_is_nothing_pending(tmp_path: Path) -> None:
    (tmp_path / SESSION).write_text("")
    assert claude_tasks.check(tmp_path, SESSION, NOW).open_count == 0

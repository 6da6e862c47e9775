from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loop.sources.aggregate import SourceConfig, check_all, combine
from loop.sources.base import SourceReport
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO, SAMPLES

TRANSCRIPT = SAMPLES / "claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "claude-home"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    monkeypatch.delenv("CLAUDE_CODE_TASK_LIST_ID", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(REPO / "tests" / "fakes" / "gh", bin_dir / "gh")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_GH_OUTPUT", str(SAMPLES / "gh-project-item-list.json"))
    return home


def test_combine_orders_by_seed_priority_and_sums() -> None:
    reports = [
        SourceReport("todos", True, True, pending=1),
        SourceReport("task_file", True, True, pending=2, in_progress=1, done=9),
        SourceReport("github", False, False, pending=50),
        SourceReport("claude_tasks", True, False, error="boom"),
    ]
    result = combine(reports)
    assert [r.name for r in result.sources] == ["github", "claude_tasks", "task_file", "todos"]
    assert result.pending_total == 4
    assert result.uncertain and [r.name for r in result.unavailable] == ["claude_tasks"]


def test_sources_json_with_flags(cli, ws: Workspace) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n- [~] b\n- [x] c\n")
    ran = cli("sources", "--json", "--task-file", "TODO.md", "--transcript", str(TRANSCRIPT), "--no-github")
    assert ran.code == 0, ran.err
    data = json.loads(ran.out)
    by_name = {s["name"]: s for s in data["sources"]}
    assert [s["name"] for s in data["sources"]] == ["github", "claude_tasks", "task_file", "todos"]
    assert (by_name["task_file"]["pending"], by_name["task_file"]["in_progress"]) == (1, 1)
    assert by_name["todos"]["done"] == 4
    assert by_name["github"]["enabled"] is False
    assert data["pending_total"] == 2 and data["uncertain"] is False
    assert by_name["task_file"]["items"][0] == {"title": "a", "status": "pending", "line": 1}


def test_sources_from_state_and_status_json(cli, ws: Workspace, isolated_home: Path) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    assert cli("start", "go", "--task-file", "TODO.md", "--github-project", "octo/3").code == 0
    store = StateStore(ws)
    state = store.read()
    assert state is not None
    state.session_id = "abc12345-0000"
    store.write(state)
    tasks = isolated_home / "tasks" / "session-abc12345"
    tasks.mkdir(parents=True)
    shutil.copy(SAMPLES / "task-pending.json", tasks / "3.json")
    out = json.loads(cli("sources", "--json").out)
    assert {s["name"]: s["pending"] for s in out["sources"]} == {
        "github": 3,
        "claude_tasks": 1,
        "task_file": 1,
        "todos": 0,
    }
    assert out["pending_total"] == 5
    status = json.loads(cli("status", "--json").out)
    assert status["pending_total"] == 5 and len(status["sources"]) == 4
    table = cli("sources").out
    assert "task_file" in table and "[pending] a (line 1)" in table


def test_uncertain_when_an_enabled_source_fails(cli, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws.root / "missing.md").write_text("- [ ] a\n")
    assert cli("start", "go", "--github-project", "5", "--task-file", "missing.md").code == 0
    (ws.root / "missing.md").unlink()  # both sources fail after the start's preflight
    monkeypatch.setenv("FAKE_GH_MODE", "auth")
    data = json.loads(cli("sources", "--json").out)
    assert data["uncertain"] is True
    table = cli("sources").out
    assert "UNAVAILABLE" in table and "UNCERTAIN" in table


def test_check_all_with_everything_off(ws: Workspace) -> None:
    config = SourceConfig(ws, check_tasks=False, check_github=False, check_todos=False)
    result = check_all(config)
    assert result.pending_total == 0 and not result.uncertain

"""Each loop keeps its own iteration logs, and they go to its archive when it ends: a new loop's
`0001.log` is never an older loop's, and the monitor's output panel follows the current loop's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop.demo import workspace
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import run_loopdeck


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    return Workspace(workspace.create(tmp_path / "repo", tasks=2))


def run(ws: Workspace, prompt: str, *extra: str) -> None:
    done = run_loopdeck(
        *["-C", str(ws.root), "run", prompt, "--agent", workspace.agent_command()],
        *["--task-file", "TODO.md", "--no-github", "--no-tasks", "--headless", *extra],
        cwd=ws.root,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr


def test_two_loops_never_share_an_iteration_log(demo: Workspace) -> None:
    from loop.views.snapshot import read
    from tui.widgets.output import followed

    run(demo, "Loop A")  # 2 tasks, 4 review loops: completed and archived
    (archive_a,) = list(demo.archive_dir.iterdir())
    assert json.loads((archive_a / "summary.json").read_text())["outcome"] == "completed"
    logs_a = sorted(p.name for p in (archive_a / "iterations").glob("*.log"))
    assert logs_a == [f"{n:04d}.log" for n in range(1, 7)]
    assert not list((demo.private_dir / "iterations").rglob("*.log"))  # nothing left behind
    (demo.root / "TODO.md").write_text("- [ ] one more\n- [ ] and another\n")
    run(demo, "Loop B", "--max-iterations", "1")  # stops at its limit, waiting for a person
    state = StateStore(demo).read()
    assert state is not None and state.prompt == "Loop B" and state.iteration == 1
    own = demo.iteration_logs(state.started_at, state.loop_id)
    assert sorted(p.name for p in own.glob("*.log")) == ["0001.log"]
    assert "one more" in (own / "0001.log").read_text()
    assert "one more" not in (archive_a / "iterations" / "0001.log").read_text()
    # an older loopdeck's shared folder still holds a later-numbered log: never followed
    (demo.private_dir / "iterations" / "0006.log").write_text("someone else's iteration\n")
    target = followed(demo, read(demo))
    assert target is not None and target.path == str(own / "0001.log")


def test_a_replaced_loop_takes_its_logs_to_its_archive(
    demo: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(demo, "Loop A", "--max-iterations", "1")
    state = StateStore(demo).read()
    assert state is not None
    own = demo.iteration_logs(state.started_at, state.loop_id)
    assert (own / "0001.log").exists()
    from datetime import datetime, timedelta

    from loop.core.model import LoopState

    later = (datetime.fromisoformat(state.started_at) + timedelta(seconds=1)).isoformat()
    real = LoopState.new.__func__  # type: ignore[attr-defined]

    def new(cls, /, prompt, **values):
        values.setdefault("started_at", later)
        return real(cls, prompt, **values)

    monkeypatch.setattr(LoopState, "new", classmethod(new))
    from tui.cli import main

    assert main(["-C", str(demo.root), "start", "Loop B", "--force", "--no-github", "--no-tasks"]) == 0
    folders = [f for f in demo.archive_dir.iterdir() if (f / "iterations").is_dir()]
    assert len(folders) == 1 and (folders[0] / "iterations" / "0001.log").exists()
    assert not own.exists()

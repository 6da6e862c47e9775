"""The Stop hook fed the hook input the real CLI sends (tests/fixtures/real-cli, captured from
Claude Code 2.1.197; 2.1.332 sends the same keys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loop.core.timeutil import utcnow
from loop.drivers import hook
from loop.store.paths import Workspace

FIXTURES = Path(__file__).parent / "fixtures" / "real-cli"


def real_input(ws: Workspace, name: str, transcript: Path) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    payload["cwd"] = str(ws.root)
    payload["transcript_path"] = str(transcript)
    return payload


def start(cli: Any, ws: Workspace) -> None:
    (ws.root / "TODO.md").write_text("- [ ] one\n- [ ] two\n")
    assert cli("start", "Do the tasks", "--task-file", "TODO.md").code == 0


def test_missing_transcript_affects_only_the_todos_source(cli: Any, ws: Workspace) -> None:
    start(cli, ws)
    payload = real_input(ws, "stop-hook-stdin-2-active.json", ws.root / "not-written-yet.jsonl")
    out = hook.handle(payload, {"CLAUDE_PROJECT_DIR": str(ws.root)}, utcnow())
    assert out is not None and out.get("decision") == "block"
    assert "one" in out["reason"] and "two" in out["reason"]


def test_real_input_blocks_while_tasks_are_pending(cli: Any, ws: Workspace, tmp_path: Path) -> None:
    start(cli, ws)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    out = hook.handle(
        real_input(ws, "stop-hook-stdin-1-first.json", transcript),
        {"CLAUDE_PROJECT_DIR": str(ws.root)},
        utcnow(),
    )
    assert out is not None and out["decision"] == "block" and "one" in out["reason"]


def test_the_runners_own_agent_is_left_alone(cli: Any, ws: Workspace, tmp_path: Path) -> None:
    """`loop.processes.agent.run` marks the runner's agent (LOOPDECK_DRIVER=runner); Claude Code passes its
    environment to hooks, so a Stop hook installed in the same project must not drive it."""
    start(cli, ws)
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    env = {"CLAUDE_PROJECT_DIR": str(ws.root), "LOOPDECK_DRIVER": "runner"}
    assert hook.handle(real_input(ws, "stop-hook-stdin-1-first.json", transcript), env, utcnow()) is None
    assert "session-bound" not in ws.journal.read_text()

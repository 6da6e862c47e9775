"""The runner's agent environment: its mark for the Stop hook, and the default agent's Task tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from loop.processes import agent


def env_of(command: str, tmp_path: Path) -> dict[str, str]:
    log = tmp_path / "agent.log"
    result = agent.run(command, "", tmp_path, log, timeout=30, interrupt=lambda: None)
    assert result.exit_code == 0
    lines = log.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_every_agent_is_marked_as_the_runners(tmp_path: Path) -> None:
    env = env_of("env", tmp_path)
    assert env["LOOPDECK_DRIVER"] == "runner"
    assert "CLAUDE_CODE_ENABLE_TODO_TOOLS" not in env  # only the default agent is Claude Code for sure


def test_the_default_agent_gets_the_task_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent, "DEFAULT_AGENT", "env")
    monkeypatch.delenv("CLAUDE_CODE_ENABLE_TODO_TOOLS", raising=False)
    assert env_of("env", tmp_path)["CLAUDE_CODE_ENABLE_TODO_TOOLS"] == "1"
    monkeypatch.setenv("CLAUDE_CODE_ENABLE_TODO_TOOLS", "0")  # the user's own setting wins
    assert env_of("env", tmp_path)["CLAUDE_CODE_ENABLE_TODO_TOOLS"] == "0"


def test_the_default_agent_may_edit_and_run_commands() -> None:
    argv = agent.DEFAULT_AGENT.split()
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--allowedTools") + 1] == "Bash"
    assert "--dangerously-skip-permissions" not in argv

"""Preflight: each mistake is one line, found before the loop starts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from loop.drivers.preflight import problems


def no_tools(_name: str) -> str | None:
    return None


def test_all_good(tmp_path: Path) -> None:
    (tmp_path / "TODO.md").write_text("- [ ] x\n")
    found = problems(
        tmp_path,
        agent="claude -p --output-format json",
        task_file="TODO.md",
        github_project="octo/5",
        which=lambda name: f"/usr/bin/{name}",
        gh_logged_in=lambda _gh: True,
    )
    assert found == []


def test_each_mistake_is_one_line(tmp_path: Path) -> None:
    found = problems(
        tmp_path, agent="claude -p", task_file="TODO.md", github_project="octo/5", which=no_tools
    )
    assert len(found) == 3 and all("\n" not in line for line in found)
    assert "'claude' is not on PATH" in found[0] and "--agent" in found[0]
    assert "TODO.md does not exist" in found[1]
    assert "`gh` is not installed" in found[2] and "--no-github" in found[2]


def test_gh_not_logged_in(tmp_path: Path) -> None:
    found = problems(
        tmp_path, github_project="5", which=lambda n: "/usr/bin/gh", gh_logged_in=lambda _gh: False
    )
    assert found == [found[0]] and "gh auth login" in found[0]


@pytest.mark.parametrize("value", [None, "null", "", "  "])
def test_unset_values_are_not_checked(tmp_path: Path, value: str | None) -> None:
    assert problems(tmp_path, task_file=value, github_project=value, which=no_tools) == []


def test_agent_by_path(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\n")
    assert problems(tmp_path, agent="./agent.sh", which=no_tools) != []
    os.chmod(script, 0o755)
    assert problems(tmp_path, agent="./agent.sh {prompt}", which=no_tools) == []
    assert problems(tmp_path, agent="'unclosed", which=no_tools)[0].startswith("the agent command")
    assert problems(tmp_path, agent="", which=no_tools) == [
        "the agent command is empty: name one with --agent AGENT"
    ]


def test_cli_start_and_run_refuse(cli: Any, ws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = cli("start", "work", "--task-file", "MISSING.md")
    assert ran.code == 1 and "MISSING.md does not exist" in ran.err and not ws.state.exists()
    monkeypatch.setenv("PATH", "/nonexistent")
    ran = cli("run", "work", "--agent", "no-such-agent --flag", "--headless")
    assert ran.code == 1 and "'no-such-agent' is not on PATH" in ran.err
    assert not ws.state.exists()

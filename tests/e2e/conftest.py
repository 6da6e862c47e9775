"""Fixtures of the agent CLIs' end-to-end suites (Claude Code's suite has its own `project`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.agent_scenarios import cli_project as _cli_project
from tests.e2e.agents_harness import CLIProject


@pytest.fixture
def cli_project(tmp_path: Path) -> Iterator[CLIProject]:
    """A git project in tmp_path, its own HOME and XDG folders, every installed CLI on its PATH
    and configured for the mock (on port 0), which it starts and stops."""
    yield from _cli_project(tmp_path)

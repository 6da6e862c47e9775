"""Fixtures of the agent CLIs' end-to-end suites (Claude Code's suite has its own `project`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, stop_hook_servers
from tests.e2e.agent_scenarios import cli_project as _cli_project
from tests.e2e.agents_harness import CLIProject


@pytest.fixture(scope="session", autouse=True)
def no_hook_server_left() -> Iterator[None]:
    """The real CLIs run loopdeck's hooks as a person's sessions do, the hook server included
    (their environment is their own: the server is not turned off); the servers they started
    leave with the suite, not 10 minutes after it. A Stop a server's child is answering
    finishes all the same, and a later one starts a server afresh."""
    yield
    stop_hook_servers(REPO / "loop" / "launcher.py")


@pytest.fixture
def cli_project(tmp_path: Path) -> Iterator[CLIProject]:
    """A git project in tmp_path, its own HOME and XDG folders, every installed CLI on its PATH
    and configured for the mock (on port 0), which it starts and stops."""
    yield from _cli_project(tmp_path)

"""loopdeck with the real Codex CLI, end to end, against the project's mock of its model API.

The pinned CLI (tests/e2e/install_clis.py) runs offline against tests/e2e/mockclis.py; the
scenarios are tests/e2e/agent_scenarios.py, shared by every CLI's suite.
"""

from __future__ import annotations

import pytest

from tests.e2e import agent_scenarios as scenarios
from tests.e2e.agents_harness import CLIProject, cli_binary

CLI = "codex"
BINARY, WHY = cli_binary(CLI)
if BINARY is None:
    pytest.skip(WHY, allow_module_level=True)

pytestmark = pytest.mark.e2e


def test_a_loop_of_three_tasks_with_tokens_and_cost_per_iteration(cli_project: CLIProject) -> None:
    scenarios.loop_of_three_tasks(cli_project, CLI)


def test_two_parallel_workers_over_a_task_graph(cli_project: CLIProject) -> None:
    scenarios.parallel_workers(cli_project, CLI)


def test_a_usage_limit_is_waited_out_without_spending_a_retry(cli_project: CLIProject) -> None:
    scenarios.usage_limit_waited_out(cli_project, CLI)


def test_a_refused_tool_is_escalated_with_how_to_allow_it(cli_project: CLIProject) -> None:
    scenarios.refused_tool_escalated(cli_project, CLI)


def test_a_limit_hands_the_turns_to_the_fallback_and_back(cli_project: CLIProject) -> None:
    scenarios.fallback_on_a_limit(cli_project, CLI)

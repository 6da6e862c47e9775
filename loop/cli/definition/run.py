"""`run`: the external runner, its agent, its loop's settings and its workers."""

from __future__ import annotations

import argparse

from loop.cli.definition.base import Command, VerbGroup
from loop.cli.definition.shared import add_limit_options, add_sandbox_options

FORMATS = ("claude", "codex", "gemini", "opencode", "text")
"""`loop.agents.FORMATS`, without importing the agents to build the parser."""


def add(verbs: VerbGroup) -> None:
    run = verbs.add_parser("run", help="the external runner: a fresh agent process per iteration")
    run.add_argument("prompt", nargs="*", metavar="PROMPT", help="what the agent works on (new loops)")
    _agent_options(run)
    _loop_options(run)
    _worker_options(run)
    run.add_argument("--no-tasks", action="store_true", help="do not check Claude Code Tasks")
    run.add_argument("--no-github", action="store_true", help="do not check GitHub Projects")
    run.add_argument(
        "--yes", action="store_true", help="run the commands a state file names without asking (scripts)"
    )
    add_limit_options(run)
    add_sandbox_options(run)
    run.set_defaults(func=Command("loop.cli.long:cmd_run"))


def _agent_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--agent",
        metavar="AGENT",
        help="claude, codex, gemini or opencode (each with a default command for unattended work in "
        "the workspace), or a full agent command: the prompt goes on stdin, or where {prompt} or "
        "{prompt_file} stands (default: claude)",
    )
    run.add_argument(
        "--agent-format",
        choices=FORMATS,
        metavar="FORMAT",
        help="how to read the agent's output: claude, codex, gemini, opencode or text "
        "(default: by the command's program name)",
    )
    run.add_argument(
        "--fallback-agent",
        metavar="AGENT",
        help="the agent (a name or a command, as --agent) to turn to while the first one is held by "
        "a usage limit; back to the first after its reset",
    )
    run.add_argument(
        "--fallback-agent-format",
        choices=FORMATS,
        metavar="FORMAT",
        help="as --agent-format, for the fallback",
    )


def _loop_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--max-iterations", type=int, metavar="N", help="escalate after N (default 100)")
    run.add_argument("--completion-promise", metavar="T", help="finish on <promise>T</promise>")
    run.add_argument("--task-file", metavar="P", help="a markdown checklist of tasks")
    run.add_argument(
        "--verify",
        action="append",
        metavar="CMD",
        help="a verification command run after every iteration (repeatable)",
    )
    run.add_argument(
        "--verify-allow",
        action="append",
        metavar="CMD",
        help="add a command to the verification allowlist (repeatable)",
    )
    run.add_argument(
        "--iteration-timeout",
        type=float,
        metavar="S",
        help="kill an agent run after S seconds (default 1800)",
    )
    run.add_argument("--retries", type=int, metavar="N", help="retries of a failed agent run (default 2)")
    run.add_argument("--commit", action="store_true", help="commit after each verified iteration")
    run.add_argument(
        "--headless",
        action="store_true",
        help="no person watching: an escalation ends the run with a summary",
    )


def _worker_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run up to N workers (1-12) in parallel over a task graph (--graph or --task-list)",
    )
    run.add_argument(
        "--graph", metavar="P", help="the task graph: a Claude Code Tasks folder, or a .json/.yaml file"
    )
    run.add_argument("--task-list", metavar="ID", help="the graph is the Claude Code task list ID")
    run.add_argument(
        "--audit", metavar="CMD", help="with --workers: a verification command approving each task (exit 0)"
    )
    run.add_argument(
        "--audit-agent",
        metavar="CMD",
        help="with --workers: an agent command given the task and the worker's output (exit 0 approves)",
    )
    run.add_argument(
        "--isolation",
        choices=("worktree", "locks"),
        help="with --workers: a git worktree and branch per task, merged one at a time (the default "
        "in a git repository), or one shared tree kept apart by file locks (the default elsewhere)",
    )
    run.add_argument(
        "--merge",
        choices=("merge", "rebase"),
        help="with worktrees: how an approved task's branch joins the loop's (default merge)",
    )
    run.add_argument(
        "--merge-batch",
        type=int,
        metavar="N",
        help="with worktrees: land up to N approved branches together, verified once "
        "(default 8; 1 verifies each on its own)",
    )
    run.add_argument(
        "--merge-checks",
        type=int,
        metavar="N",
        help="with worktrees: when a batch fails, how many of the checks that find the branch "
        "that broke it run at once (default 2; each in a scratch worktree of its own)",
    )
    run.add_argument(
        "--pr",
        action="store_true",
        help="with worktrees: each task becomes a pull request on the repository's host (gh); "
        "its checks and reviews go back to its worker until green and approved, then it is merged",
    )

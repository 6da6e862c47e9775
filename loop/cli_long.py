"""The long-running verb `loopdeck run`, apart from `loop.cli` so that the quick verbs (and the
Stop hook) never load the runner. The monitor's verbs (`tui`, `demo`) live in `tui.cli`: `loop`
never imports the monitor."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loop.errors import LoopdeckError
from loop.paths import Workspace, find_workspace

# --- run -----------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from loop import agent
    from loop.model import Settings
    from loop.runner import Options, Runner
    from loop.state import LoopState, StateStore

    ws = Workspace(Path(args.workspace).resolve()) if args.workspace else find_workspace()
    existing = StateStore(ws).read()
    recorded = existing.extra.get("runner", {}) if existing is not None else {}
    if not isinstance(recorded, dict):
        recorded = {}

    def pick(name: str, given: Any, default: Any) -> Any:
        return given if given is not None else recorded.get(name, default)

    options = Options(
        agent=pick("agent", args.agent, agent.DEFAULT_AGENT),
        iteration_timeout=pick("iteration_timeout", args.iteration_timeout, 1800.0),
        retries=pick("retries", args.retries, 2),
        commit=bool(pick("commit", True if args.commit else None, False)),
        headless=args.headless,
        agent_given=args.agent is not None,
        trusted=args.yes,
        confirm=_ask if sys.stdin.isatty() and not args.headless else None,
    )
    try:
        agent.check_template(options.agent)  # refused before the loop starts, not per attempt
    except agent.AgentCommandRefused as exc:
        raise LoopdeckError(str(exc)) from None
    prompt = " ".join(args.prompt).strip()
    if existing is not None and prompt and prompt != existing.prompt:
        print(
            f"loopdeck: continuing the loop in {ws.root}; the PROMPT given is ignored "
            "(`loopdeck start --force` starts anew)",
            file=sys.stderr,
        )

    def create() -> LoopState:
        if not prompt:
            raise LoopdeckError(f"no loop in {ws.root}: `loopdeck run PROMPT` starts one")
        from loop.control import end_offset

        control_offset = end_offset(ws)
        state = LoopState.new(
            prompt,
            max_iterations=args.max_iterations if args.max_iterations is not None else 100,
            completion_promise=args.completion_promise or "null",
            task_file=args.task_file or "null",
            check_tasks=not args.no_tasks,
            check_github=not args.no_github,
            verify=list(args.verify or []),
            control_offset=control_offset,
            limits=limits,
            notify=list(args.notify or []),
        )
        if args.verify_allow:
            state.extra["verify_allow"] = list(args.verify_allow)
        return state

    from loop import preflight  # before anything is written
    from loop.cli import limits_from

    task_file = existing.task_file if existing is not None else args.task_file
    project = existing.github_project_id if existing is not None and existing.check_github else None
    if existing is not None or prompt:  # else "no loop" is the one thing to say
        preflight.require(ws.root, agent=options.agent, task_file=task_file, github_project=project)

    limits = limits_from(args)
    settings = Settings(
        max_iterations=args.max_iterations if existing is not None else None,
        limits=limits if existing is not None and limits else None,
        notify=list(args.notify) if existing is not None and args.notify else None,
        verify=list(args.verify) if existing is not None and args.verify else None,
        verify_allow=list(args.verify_allow) if existing is not None and args.verify_allow else None,
    )
    runner = Runner(ws, options, settings=settings)
    if args.workers is not None:
        from loop.parallel_cli import run_parallel

        return run_parallel(args, ws, options, runner, existing, create)
    return runner.run(create)


def _ask(commands: list[str]) -> bool:
    """Ask the person at the terminal to confirm commands this machine never chose."""
    print("The loop's state file names commands nobody on this machine chose:", file=sys.stderr)
    for command in commands:
        print(f"  {command}", file=sys.stderr)
    try:
        return input("Run them? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False

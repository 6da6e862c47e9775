"""`loopdeck start`: a new in-session loop, as `/orchestrator-loop` starts one (the next Stop of
the Claude Code session in this folder drives it); and the `Request` for a new loop that
`start`, `run` and `run --workers` make from their options."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from loop.cli.options import LOOP_KEYS, ask_config, fill, limits_from, workspace_here
from loop.drivers import defaults
from loop.drivers.start import Request, start_loop
from loop.store.paths import Workspace
from loop.trust.person import refuse_inside_agent


def cmd_start(args: argparse.Namespace) -> int:
    refuse_inside_agent("`loopdeck start` (in a session, type /orchestrator-loop)")
    ws = workspace_here(args)
    prompt = " ".join(args.prompt)
    if prompt.strip():  # else the one thing to say is that a PROMPT is needed
        _start_defaults(args, ws)
    _state, lines = start_loop(ws, request_from(args, prompt, force=args.force), "start")
    for line in lines:
        print(f"loopdeck: {line}" if not line.startswith("To finish") else line)
    return 0


def _start_defaults(args: argparse.Namespace, ws: Workspace) -> None:
    """Fill the options `start` was not given from the saved defaults (the command line wins);
    a workspace file's values are confirmed at the terminal first."""
    wanted = [k for k in LOOP_KEYS if getattr(args, k) is None]
    confirm = ask_config if sys.stdin.isatty() else None
    saved = defaults.settle(ws, wanted, confirm=confirm, by="start")
    fill(args, saved, LOOP_KEYS)


def request_from(args: argparse.Namespace, prompt: str, **given: Any) -> Request:
    """A new loop as `start`, `run` and `run --workers` were asked for it (the options the
    three share); `given` holds what differs (no task sources for a loop of workers)."""
    values: dict[str, Any] = {
        "max_iterations": args.max_iterations if args.max_iterations is not None else 100,
        "completion_promise": getattr(args, "completion_promise", None) or "null",
        "task_file": getattr(args, "task_file", None),
        "check_tasks": not getattr(args, "no_tasks", False),
        "check_github": not getattr(args, "no_github", False),
        "github_project": getattr(args, "github_project", None),
        "verify": list(args.verify or []),
        "verify_allow": list(args.verify_allow or []),
        "notify": list(args.notify or []),
    }
    values.update(given)
    if "limits" not in values:
        values["limits"] = limits_from(args)
    return Request(prompt, **values)

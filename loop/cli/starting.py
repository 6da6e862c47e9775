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
    named = getattr(args, "design", None)
    if not prompt.strip() and not named:
        # No PROMPT and no design named: the newest design in the workspace is what the person
        # prepared for this loop. A PROMPT given is the person's word and takes no design.
        from loop.design import newest

        found = newest(ws.root)
        if found is not None:
            args.design = str(found)
            print(f"loopdeck: starting from the newest design, {found.name} (--design names another)")
    if prompt.strip() or getattr(
        args, "design", None
    ):  # else the one thing to say is that a PROMPT is needed
        _start_defaults(args, ws)
    request = request_from(args, prompt, force=args.force)
    _state, lines = start_loop(ws, with_design(args, ws, request), "start")
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


def with_design(args: argparse.Namespace, ws: Workspace, request: Request) -> Request:
    """`request` as the design `--design` names makes it: the prompt made from the design (a
    PROMPT given too goes into it as the person's note), the design's promise unless one was
    given, its commands as checks. A person at a terminal confirms those commands now; anywhere
    else they wait for `loopdeck trust`."""
    named = getattr(args, "design", None)
    if not named:
        return request
    from pathlib import Path

    from loop.design import lock, prompt, read

    path = Path(named)
    if not path.is_absolute():  # as the workspace names it, else as the terminal's folder does
        path = (
            ws.root / path
            if (ws.root / path).exists() or not (Path.cwd() / path).exists()
            else Path.cwd() / path
        )
    design = read(path)
    request.design = lock.record(ws.root, design)
    request.prompt = prompt.build(design, request.design["path"], note=request.prompt)
    if request.completion_promise in (None, "", "null"):
        request.completion_promise = design.promise
    if request.design_commands and sys.stdin.isatty():
        request.design_confirmed = _ask_commands(request.design["path"], request.design_commands)
    return request


def _ask_commands(where: str, commands: list[str]) -> bool:
    """Ask the person at the terminal to confirm the commands a design names."""
    print(f"{where} names commands loopdeck runs to check the work:", file=sys.stderr)
    for command in commands:
        print(f"  {command}", file=sys.stderr)
    try:
        return input("Run them after each turn? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False

"""The long-running verbs: `loopdeck run`, `loopdeck tui` and `loopdeck demo`.

Apart from `loop.cli` so the quick verbs (and the Stop hook) never parse them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from loop.errors import LoopdeckError
from loop.paths import Workspace, find_workspace
from loop.safeopen import open_append

# --- run -----------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from loop import agent
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
        )
        if args.verify_allow:
            state.extra["verify_allow"] = list(args.verify_allow)
        return state

    if existing is not None and (args.verify or args.verify_allow or args.max_iterations is not None):
        store = StateStore(ws)
        with store.locked():
            state = store.read()
            if state is not None:
                if args.verify:
                    state.verify = list(args.verify)
                if args.verify_allow:
                    state.extra["verify_allow"] = list(args.verify_allow)
                if args.max_iterations is not None:
                    state.max_iterations = args.max_iterations
                store.write(state)
    return Runner(ws, options).run(create)


# --- the monitor and the demo ----------------------------------------------------------------


def cmd_tui(args: argparse.Namespace) -> int:
    from tui.app import LoopdeckApp

    folder = args.dir or args.workspace
    ws = Workspace(Path(folder).resolve()) if folder else find_workspace()
    if not ws.root.is_dir():
        raise LoopdeckError(f"{ws.root} is not a folder")
    LoopdeckApp(ws).run()
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import subprocess
    import tempfile

    from loop.demo import workspace

    root = Path(tempfile.mkdtemp(prefix="loopdeck-demo-")) / "project"
    workspace.create(root, tasks=8)
    # One verification failure along the way: the fifth task (line 7) is done with a broken file.
    low, high = (os.environ.get("LOOPDECK_DEMO_PACE") or "1 2").split()[:2]  # seconds per agent turn
    agent_cmd = workspace.agent_command("--sleep", low, high, "--break-at", "7")
    check = workspace.verify_command()
    argv = [
        sys.executable,
        "-m",
        "loop.cli",
        "-C",
        str(root),
        "run",
        "Build the demo todo service",
        "--agent",
        agent_cmd,
        "--task-file",
        "TODO.md",
        "--verify",
        check,
        "--verify-allow",
        check,
        "--no-github",
        "--no-tasks",
        "--max-iterations",
        "40",
        "--commit",
    ]
    print(f"loopdeck demo: a throwaway git workspace in {root}")
    if args.headless:
        return subprocess.call([*argv, "--headless"], cwd=root)
    from tui.app import LoopdeckApp

    log = root / ".claude" / "loopdeck" / "runner.log"
    with open_append(log) as out:
        runner = subprocess.Popen(
            argv,
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    ws = Workspace(root)
    deadline = time.monotonic() + 10
    while not ws.state.exists() and runner.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)

    def end_runner() -> None:
        if runner.poll() is None:
            runner.terminate()  # SIGTERM: the runner stops its agent and saves the state
            try:
                runner.wait(15)
            except subprocess.TimeoutExpired:
                runner.kill()

    try:
        LoopdeckApp(ws, on_quit=end_runner).run()
    finally:
        end_runner()
    print(f"loopdeck demo: ended; the workspace stays in {root} (the runner's log: {log})")
    return 0

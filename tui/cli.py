"""The `loopdeck` command: the monitor's verbs (`tui`, `demo`) here, every other verb in
`loop.cli`.

`loop` never imports the monitor, not even lazily, so the verbs that open it live on this side
of the line and are handed to `loop.cli.main`, which parses every verb. This module imports
Textual only inside the verbs that need it: `loopdeck hook stop` passes through here on every
agent turn.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from loop import cli
from loop.core.errors import LoopdeckError
from loop.repo.gitargv import git_argv
from loop.store.paths import Workspace, find_workspace
from loop.store.safeopen import open_append

if TYPE_CHECKING:
    from tui.app import LoopdeckApp
    from tui.monitor import MonitorApp
    from tui.temporal import TemporalApp


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, monitor={"tui": cmd_tui, "demo": cmd_demo, "serve": cmd_serve})


def has_terminal() -> bool:
    """Can the monitor be drawn and steered here? It reads keys from stdin and draws on stdout:
    with either one a file, a pipe or closed, Textual's driver would read an input that ended
    at full speed forever and draw into a file. (A driver named in the environment, as a
    browser's, brings its own.)"""
    return (sys.stdin.isatty() and sys.stdout.isatty()) or "TEXTUAL_DRIVER" in os.environ


def cmd_tui(args: argparse.Namespace) -> int:
    from tui import allocator  # ~3 ms (`-X importtime`, ctypes): `serve` and `demo` never use it

    if getattr(args, "temporal", None):  # the loops of a Temporal server
        temporal = temporal_app(args)
        _need_terminal()
        allocator.tune()
        temporal.run()
        return 0
    app = monitor_app(args)  # the folders checked first: that error says more
    _need_terminal()
    allocator.tune()  # a monitor runs for days: its memory stays flat (`tui/allocator.py`)
    app.settles = True  # and its garbage collector too (`tui/collector.py`)
    app.run()
    return 0


def _need_terminal() -> None:
    if not has_terminal():
        raise LoopdeckError(
            "the monitor needs a terminal (its keys come from stdin, its screen goes to stdout); "
            "without one, `loopdeck status` and `loopdeck log -f` show the loop, and "
            "`loopdeck serve` shows the monitor in a browser"
        )


def temporal_app(args: argparse.Namespace) -> TemporalApp:
    # Here, not at the top: Textual and the Temporal client, ~670 ms (`-X importtime`), for --temporal only
    from loop.cli.temporal import backend
    from tui.temporal import TemporalApp

    return TemporalApp(backend().target_of(args), getattr(args, "workflow", None))


def monitor_app(args: argparse.Namespace) -> MonitorApp:
    """The monitor the arguments ask for: one folder, several (the fleet), or a scan."""
    from tui.monitor import MonitorApp  # ~440 ms (`-X importtime`, Textual): `serve`, `demo` never use it

    if args.scan:
        root = Path(args.scan).resolve()
        if not root.is_dir():
            raise LoopdeckError(f"--scan {args.scan}: not a folder")
        return MonitorApp([], scan_root=root, scan_depth=args.depth)
    return MonitorApp(_folders(args))


def _folders(args: argparse.Namespace) -> list[Workspace]:
    folders = list(args.dir or ([args.workspace] if args.workspace else []))
    if not folders:
        return [find_workspace()]
    workspaces = [Workspace(Path(folder).resolve()) for folder in folders]
    for ws in workspaces:
        if not ws.root.is_dir():
            raise LoopdeckError(f"{ws.root} is not a folder")
    return workspaces


def cmd_serve(args: argparse.Namespace) -> int:
    from tui import serve, serve_http  # ~300 ms (`-X importtime`, aiohttp): for this verb only

    dirs = [str(ws.root) for ws in _folders(args)] if not args.scan else []
    scan = str(Path(args.scan).resolve()) if args.scan else None
    if scan is not None and not Path(scan).is_dir():
        raise LoopdeckError(f"--scan {args.scan}: not a folder")
    if getattr(args, "token", None) is not None:
        raise LoopdeckError(serve.NO_ARGV)
    token, made_up = serve.choose_token(args.token_file, os.environ)
    os.environ.pop(serve.TOKEN_ENV, None)  # the monitor processes have no use for it
    temporal = None
    if getattr(args, "temporal", None):  # the loops of a Temporal server
        from loop.cli.temporal import backend  # ~35 ms (`-X importtime`): for --temporal only

        temporal = {**backend().target_of(args).to_json(), "workflow": getattr(args, "workflow", None)}
    server = serve.make_server(dirs, scan, args.depth, args.host, args.port, token, temporal)
    sock = serve_http.listen(args.host, args.port)
    server.bound_to(sock)
    # Printed once, on stdout: the only place a made-up token is ever shown.
    shown = quote(token, safe="") if made_up else "…"
    print(
        f"loopdeck: the monitor is served; open {serve.address(args.host, server.port)}/?token={shown}"
        " (Ctrl+C stops it; the loops go on)",
        flush=True,
    )
    server.serve_on(sock)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from loop.demo import workspace  # ~25 ms (`-X importtime`): `tui` and `serve` never use it

    workers = getattr(args, "workers", None)
    if workers is not None and not 2 <= workers <= 12:
        raise LoopdeckError("demo --workers takes 2 to 12 (without it, the demo runs one agent)")
    if not args.headless and not has_terminal():
        print("loopdeck demo: no terminal for the monitor: the loop's log instead (as --headless)")
        args.headless = True
    for old in workspace.remove_previous():  # only folders an earlier demo made and marked
        print(f"loopdeck demo: removed the previous demo's workspace {old}", flush=True)
    root = workspace.make_folder() / "project"
    workspace.create(root, tasks=8)
    if workers is not None:
        return _demo_workers(args, root)
    # One verification failure along the way: the fifth task (line 7) is done with a broken file.
    low, high = (os.environ.get("LOOPDECK_DEMO_PACE") or "1 2").split()[:2]  # seconds per agent turn
    agent_cmd = workspace.agent_command("--sleep", low, high, "--break-at", "7")
    check = workspace.verify_command()
    argv = [
        sys.executable,
        "-I",
        "-m",
        "tui.cli",
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
    print(f"loopdeck demo: a throwaway git workspace in {root}; the next demo removes it", flush=True)
    if args.headless:
        return subprocess.call([*argv, "--headless"], cwd=root)
    return _monitor(root, argv)


DEMO_QUIT = "q ends the demo and stops its loop (on your own loops, quitting the monitor leaves them running)"
"""Said before the demo's monitor opens, and in it: unlike the monitor on a person's own loop,
quitting the demo stops the demo's loop (nothing is left running after a demo)."""


def demo_app(ws: Workspace, on_quit: Callable[[], None]) -> LoopdeckApp:
    """The monitor on the demo's loop: it says at once that `q` ends the demo, loop and all."""
    from tui.app import LoopdeckApp  # ~420 ms (`-X importtime`, Textual): `serve` never uses it

    class DemoApp(LoopdeckApp):
        def on_mount(self) -> None:  # Textual runs the monitor's own `on_mount` after this one
            self.notify(DEMO_QUIT, title="loopdeck demo", timeout=12)

    return DemoApp(ws, on_quit=on_quit)


def _monitor(root: Path, argv: list[str]) -> int:
    """The runner in the background, the monitor in front; quitting ends the runner (the demo
    says so before it starts, and in the monitor)."""
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

    print(f"loopdeck demo: {DEMO_QUIT}", flush=True)
    try:
        app = demo_app(ws, end_runner)
        app.settles = True
        app.run()
    finally:
        end_runner()
    print(
        f"loopdeck demo: ended; the workspace stays in {root} until the next demo (the runner's log: {log})"
    )
    return 0


def _demo_workers(args: argparse.Namespace, root: Path) -> int:
    """`demo --workers N`: scripted workers over a small graph with dependencies and one file
    conflict; one task's first attempt is rejected by the audit and redone."""
    # Here, not at the top: ~5 ms (`-X importtime`) that `tui` and `serve` never use
    from loop.demo import graph, workspace
    from loop.demo.worker import AUDIT

    folder = graph.create(root / ".claude" / "loopdeck" / "demo-tasks")  # inside: a graph is written
    (root / "audit.py").write_text(AUDIT)
    git = git_argv("-c", "user.name=loopdeck demo", "-c", "user.email=demo@loopdeck.invalid")
    subprocess.run([*git, "add", "audit.py"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "demo: the audit"], cwd=root, check=True)
    low, high = (os.environ.get("LOOPDECK_DEMO_PACE") or "1 3").split()[:2]
    # task 8 also writes README.md, which task 5 holds: their branches conflict, and one of them
    # is handed back to resolve it (worktrees), after the audit has sent task 4 back once
    agent_cmd = workspace.agent_command("--sleep", low, high, "--break-on", "4", "--stray", "8:README.md")
    agent_cmd = agent_cmd.replace("loop.demo.agent", "loop.demo.worker")
    audit = shlex.join([sys.executable, "-I", "audit.py"])
    argv = [
        *[sys.executable, "-I", "-m", "tui.cli", "-C", str(root), "run", "Build the demo todo service"],
        *["--workers", str(args.workers), "--graph", str(folder), "--agent", agent_cmd],
        *["--audit", audit, "--verify-allow", audit, "--commit"],
    ]
    print(
        f"loopdeck demo: a throwaway git workspace in {root}, its task graph in {folder}; "
        "the next demo removes it",
        flush=True,
    )
    if args.headless:
        return subprocess.call([*argv, "--headless"], cwd=root)
    return _monitor(root, argv)


if __name__ == "__main__":
    sys.exit(main())

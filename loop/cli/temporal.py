"""The command line of the Temporal engine: its options on the existing verbs (`run --engine
temporal`, `--temporal ADDRESS --workflow ID` on the steering and reading verbs) and its own
verbs (`worker`, `temporal dev`). Parsing only: the verbs themselves live in
`loop.temporal.cli`, imported when one is asked for, so no other verb loads the SDK (and a
machine without the `temporal` extra gets one line saying how to install it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from loop.cli.options import add_sandbox_options
from loop.core.errors import LoopdeckError
from loop.store.paths import Workspace

STEERING = ("pause", "skip", "complete", "stop", "say", "answer", "set-max-iterations", "resume")
READING = ("status", "log")
INSTALL = "the Temporal engine is not installed: pip install 'loopdeck[temporal]'"


def backend() -> Any:
    """`loop.temporal.cli`, or one line saying how to install it."""
    try:
        from loop.temporal import cli
    except ImportError as exc:
        if "temporalio" in str(exc):
            raise LoopdeckError(INSTALL) from None
        raise
    return cli


def add_target(verb: argparse.ArgumentParser, flag: str = "--temporal") -> None:
    """Where the loops are: the server, its namespace, and this machine's client certificate."""
    verb.add_argument(flag, metavar="HOST:PORT", help="the Temporal server the loop runs on")
    verb.add_argument("--namespace", metavar="NS", help="the Temporal namespace (default: default)")
    verb.add_argument("--tls-cert", metavar="FILE", help="mTLS: this machine's client certificate (PEM)")
    verb.add_argument("--tls-key", metavar="FILE", help="mTLS: the client certificate's private key (PEM)")
    verb.add_argument(
        "--tls-ca", metavar="FILE", help="mTLS: the CA certificate that signed the server's (PEM)"
    )


def extend(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the Temporal engine's options and verbs to the parser `loop.cli` built."""
    parsers = verbs.choices
    run = parsers["run"]
    run.add_argument(
        "--engine",
        choices=("local", "temporal"),
        default="local",
        help="with --workers: run the loop here (local, the default), or as a workflow on a "
        "Temporal server whose workers (`loopdeck worker`) may be on other machines",
    )
    run.add_argument("--address", metavar="HOST:PORT", help="with --engine temporal: the Temporal server")
    run.add_argument(
        "--namespace", metavar="NS", help="with --engine temporal: its namespace (default: default)"
    )
    run.add_argument(
        "--task-queue", metavar="Q", help="with --engine temporal: the workers' queue (default: loopdeck)"
    )
    run.add_argument(
        "--tls-cert", metavar="FILE", help="with --engine temporal: mTLS client certificate (PEM)"
    )
    run.add_argument("--tls-key", metavar="FILE", help="with --engine temporal: its private key (PEM)")
    run.add_argument(
        "--tls-ca", metavar="FILE", help="with --engine temporal: the server's CA certificate (PEM)"
    )
    run.add_argument(
        "--remote",
        metavar="URL",
        help="with --engine temporal: the shared git remote (default: origin's URL)",
    )
    run.add_argument(
        "--heartbeat-timeout",
        type=float,
        metavar="S",
        help="with --engine temporal: a worker silent this long is lost and its turn goes to another (30)",
    )
    run.add_argument(
        "--idle",
        type=float,
        metavar="S",
        help="with --engine temporal: how often a loop with nothing under way looks again (10)",
    )
    run.add_argument(
        "--detach", action="store_true", help="with --engine temporal: start the loop and return (it goes on)"
    )
    for name in (*STEERING, *READING):
        verb = parsers[name]
        add_target(verb)
        verb.add_argument("--workflow", metavar="ID", help="with --temporal: the loop's workflow id")
    for name in ("tui", "serve"):
        add_target(parsers[name])
        parsers[name].add_argument("--workflow", metavar="ID", help="with --temporal: open this loop")

    worker = verbs.add_parser(
        "worker",
        help="run workers' turns for loops on a Temporal server (--engine temporal), on this machine",
        description="Serve the loops of a Temporal server from this machine: workers' turns (the agent "
        "in a worktree of the shared git remote), merges, audits. Credentials (the agent's API key, git "
        "tokens) stay in this machine's environment.",
    )
    add_target(worker, "--address")
    worker.add_argument(
        "--task-queue", default="loopdeck", metavar="Q", help="the queue to serve (default: loopdeck)"
    )
    worker.add_argument(
        "--agent",
        action="append",
        metavar="AGENT",
        help="an agent this worker runs (a name or a command, repeatable; default: the four CLIs' "
        "default commands): a loop naming another gets a failed turn, not a run",
    )
    worker.add_argument(
        "--verify-allow",
        action="append",
        metavar="CMD",
        help="an exact verification or audit command beyond the allowlist this worker runs when a "
        "loop asks for it (repeatable); a loop's own allowances run only when named here too",
    )
    worker.add_argument("--max-turns", type=int, metavar="N", help="leave after N turns")
    worker.add_argument("--concurrency", type=int, default=1, metavar="N", help="turns at once (default 1)")
    worker.add_argument(
        "--work-dir",
        metavar="DIR",
        help="the clones, worktrees and logs (default ~/.cache/loopdeck/temporal)",
    )
    worker.add_argument(
        "--heartbeat", type=float, default=2.0, metavar="S", help="seconds between heartbeats (default 2)"
    )
    add_sandbox_options(worker)
    worker.set_defaults(func=lambda args: backend().worker(args))

    temporal = verbs.add_parser("temporal", help="the Temporal engine's tools")
    tools = temporal.add_subparsers(dest="tool", metavar="TOOL", required=True)
    dev = tools.add_parser(
        "dev", help="start Temporal's dev server from the wheel, for trying a loop of workers on one machine"
    )
    dev.add_argument(
        "--db-filename",
        default=".loopdeck/temporal.db",
        metavar="FILE",
        help="its database: a server started again on the same file goes on (default .loopdeck/temporal.db)",
    )
    dev.add_argument("--port", type=int, default=7233, help="its gRPC port (default 7233)")
    dev.add_argument("--ip", default="127.0.0.1", help="the address it listens on (default 127.0.0.1)")
    dev.add_argument("--ui", action="store_true", help="also serve Temporal's web UI (port + 1000)")
    dev.set_defaults(func=lambda args: backend().dev(args))


def wanted(args: argparse.Namespace, ws: Workspace | None) -> bool:
    """Is this steering or reading verb for a loop on Temporal (`--temporal`, or the
    workspace's record of its loop there)? The record wins over a loop of the workspace's own
    started before it (a hook or runner loop left from earlier): the later loop is the one a
    person means."""
    if getattr(args, "temporal", None):
        return True
    if ws is None:
        return False
    record = ws.private_dir / "temporal.json"
    if not record.is_file():
        return False
    if not ws.state.exists():
        return True
    return _record_is_newer(record, ws)


def _record_is_newer(record: Path, ws: Workspace) -> bool:
    """Did the recorded Temporal loop start after the workspace's own loop (whose state file
    is there too)? An unreadable state is no loop to steer: the record wins."""
    import json

    from loop.core.timeutil import parse_iso
    from loop.store.safeopen import read_regular
    from loop.store.state import StateStore

    try:
        recorded = parse_iso(str(json.loads(read_regular(record, 64 * 1024)).get("started_at", "")))
    except (OSError, ValueError, AttributeError):
        return False
    try:
        state = StateStore(ws).read()
    except (OSError, LoopdeckError):
        return True
    if state is None:
        return True
    own = parse_iso(state.started_at or "")
    return recorded is not None and (own is None or recorded >= own)

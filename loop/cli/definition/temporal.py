"""The Temporal engine's command line: its options on the existing verbs (`run --engine
temporal`, `--temporal ADDRESS --workflow ID` on the steering and reading verbs, the monitor's)
and its own verbs (`worker`, `temporal dev`). Their code (`loop.temporal.cli`) loads only when
one is asked for, so no other verb loads the SDK."""

from __future__ import annotations

import argparse

from loop.cli.definition.base import Command, VerbGroup
from loop.cli.definition.shared import add_sandbox_options

STEERING = ("pause", "skip", "complete", "stop", "say", "answer", "set-max-iterations", "resume")
READING = ("status", "log")


def add_target(verb: argparse.ArgumentParser, flag: str = "--temporal") -> None:
    """Where the loops are: the server, its namespace, and this machine's client certificate."""
    verb.add_argument(flag, metavar="HOST:PORT", help="the Temporal server the loop runs on")
    verb.add_argument("--namespace", metavar="NS", help="the Temporal namespace (default: default)")
    verb.add_argument("--tls-cert", metavar="FILE", help="mTLS: this machine's client certificate (PEM)")
    verb.add_argument("--tls-key", metavar="FILE", help="mTLS: the client certificate's private key (PEM)")
    verb.add_argument(
        "--tls-ca", metavar="FILE", help="mTLS: the CA certificate that signed the server's (PEM)"
    )


def add(verbs: VerbGroup) -> None:
    """The Temporal engine's options on the verbs made before, and its own verbs."""
    parsers = verbs.choices
    _run_options(parsers["run"])
    for name in (*STEERING, *READING):
        verb = parsers[name]
        add_target(verb)
        verb.add_argument("--workflow", metavar="ID", help="with --temporal: the loop's workflow id")
    for name in ("tui", "serve"):
        add_target(parsers[name])
        parsers[name].add_argument("--workflow", metavar="ID", help="with --temporal: open this loop")
    _worker(verbs)
    _tools(verbs)


def _run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--engine",
        choices=("local", "temporal"),
        default="local",
        help="with --workers: run the loop here (local, the default), or as a workflow on a "
        "Temporal server whose workers (`loopdeck worker`) may be on other machines",
    )
    for flag, metavar, what in (
        ("--address", "HOST:PORT", "the Temporal server"),
        ("--namespace", "NS", "its namespace (default: default)"),
        ("--task-queue", "Q", "the workers' queue (default: loopdeck)"),
        ("--tls-cert", "FILE", "mTLS client certificate (PEM)"),
        ("--tls-key", "FILE", "its private key (PEM)"),
        ("--tls-ca", "FILE", "the server's CA certificate (PEM)"),
        ("--remote", "URL", "the shared git remote (default: origin's URL)"),
    ):
        run.add_argument(flag, metavar=metavar, help=f"with --engine temporal: {what}")
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


def _worker(verbs: VerbGroup) -> None:
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
    worker.set_defaults(func=Command("loop.cli.temporal:cmd_worker"))


def _tools(verbs: VerbGroup) -> None:
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
    dev.set_defaults(func=Command("loop.cli.temporal:cmd_dev"))

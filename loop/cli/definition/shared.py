"""Options more than one verb takes: a loop's limits (`start`, `run`) and the agent's sandbox
(`run`, `worker`). Read back by `loop.cli.options`."""

from __future__ import annotations

import argparse


def add_limit_options(verb: argparse.ArgumentParser) -> None:
    """The options `start` and `run` share for a loop left alone: budget, stuck thresholds,
    who to tell."""
    verb.add_argument(
        "--max-cost", type=float, metavar="USD", help="escalate when the agent's reported cost reaches USD"
    )
    verb.add_argument(
        "--stuck-after", type=int, metavar="N", help="escalate after N working turns without progress (2)"
    )
    verb.add_argument(
        "--same-error-after", type=int, metavar="N", help="escalate after the same error N times (3)"
    )
    verb.add_argument(
        "--notify",
        action="append",
        metavar="TARGET",
        help="tell a person when needed or done: desktop, a webhook URL, or cmd:PROGRAM (repeatable)",
    )


def add_sandbox_options(verb: argparse.ArgumentParser) -> None:
    """`--sandbox`, `--sandbox-net`, `--sandbox-env`: where the agent's turns run."""
    verb.add_argument(
        "--sandbox",
        choices=("auto", "on", "off"),
        help="run each agent turn in a sandbox (bubblewrap on Linux, sandbox-exec on macOS): the "
        "workspace writable, loopdeck's files and git's config read-only; auto (the default) when "
        "one can start here, on refuses to run without one",
    )
    verb.add_argument(
        "--sandbox-net",
        choices=("on", "off"),
        help="whether an agent in the sandbox reaches the network (default on)",
    )
    verb.add_argument(
        "--sandbox-env",
        action="append",
        metavar="NAME",
        help="pass the variable NAME into the sandbox (repeatable; the agents' own keys always pass)",
    )

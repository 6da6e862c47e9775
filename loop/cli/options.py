"""The options `start` and `run` share for a loop left alone (budget, stuck thresholds, who to
tell), checked where they are read: one place for the verbs that take them."""

from __future__ import annotations

import argparse

from loop.core.errors import LoopdeckError

LOOP_KEYS = (
    "notify",
    "verify",
    "verify_allow",
    "max_iterations",
    "max_cost",
    "stuck_after",
    "same_error_after",
)
"""Saved defaults that are a new loop's settings, for `start` and `run` alike (an existing loop
keeps its own)."""


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


SANDBOX_KEYS = ("sandbox", "sandbox_net", "sandbox_env")
"""Saved defaults of the agent's sandbox (`loop.processes.sandbox`), for `run`."""


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


def sandbox_from(args: argparse.Namespace, saved: object = None) -> tuple[str, bool, tuple[str, ...]]:
    """The sandbox's mode, network and extra variables: the command line's, else the saved
    defaults' (`saved.get(key)`), else LOOPDECK_SANDBOX's mode, else auto, network on."""
    from loop.processes import sandbox

    given = (
        getattr(args, "sandbox", None),
        getattr(args, "sandbox_net", None),
        getattr(args, "sandbox_env", None),
    )
    return sandbox.settings(*given, saved)


def notify_check(target: str) -> str | None:
    from loop.drivers.notify import check_target

    return check_target(target)


def limits_from(args: argparse.Namespace) -> dict[str, int]:
    """The limit options given, as the state records them (cost in millionths of a dollar)."""
    limits: dict[str, int] = {}
    if args.max_cost is not None:
        if args.max_cost <= 0:
            raise LoopdeckError("--max-cost must be more than 0 (US dollars)")
        limits["max_cost_micro_usd"] = round(args.max_cost * 1_000_000)
    for name in ("stuck_after", "same_error_after"):
        value = getattr(args, name)
        if value is not None:
            if value < 1:
                raise LoopdeckError(f"--{name.replace('_', '-')} must be 1 or more")
            limits[name] = value
    for target in getattr(args, "notify", None) or []:
        problem = notify_check(target)
        if problem:
            raise LoopdeckError(problem)
    return limits


def check_timeout(value: object, where: str) -> float:
    """An agent run's time limit, in seconds: a number above 0. `where` says where it was read
    (the option, the state file, a config file), so a bad value is found where it was typed."""
    import math

    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise LoopdeckError(
            f"{where}: the iteration timeout must be a number of seconds above 0, got {value!r}"
        )
    return float(value)


def check_retries(value: object, where: str) -> int:
    """How many times a failed agent run is tried again: a whole number from 0 to 100."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise LoopdeckError(f"{where}: retries must be a whole number from 0 to 100, got {value!r}")
    return value

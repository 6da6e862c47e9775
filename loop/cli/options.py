"""The options `start` and `run` share for a loop left alone (budget, stuck thresholds, who to
tell), checked where they are read: one place for the verbs that take them."""

from __future__ import annotations

import argparse

from loop.core.errors import LoopdeckError


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

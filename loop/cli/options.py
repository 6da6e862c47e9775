"""The options `start` and `run` share for a loop left alone (budget, stuck thresholds, who to
tell) and the agent's sandbox, checked where they are read: one place for the verbs that take
them (their definition is in `loop.cli.definition.shared`)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loop.core.errors import LoopdeckError
from loop.drivers.notify import check_target
from loop.processes import sandbox
from loop.store.paths import Workspace, find_workspace

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


SANDBOX_KEYS = ("sandbox", "sandbox_net", "sandbox_env")
"""Saved defaults of the agent's sandbox (`loop.processes.sandbox`), for `run`."""


def sandbox_from(args: argparse.Namespace, saved: object = None) -> tuple[str, bool, tuple[str, ...]]:
    """The sandbox's mode, network and extra variables: the command line's, else the saved
    defaults' (`saved.get(key)`), else LOOPDECK_SANDBOX's mode, else auto, network on."""
    given = (
        getattr(args, "sandbox", None),
        getattr(args, "sandbox_net", None),
        getattr(args, "sandbox_env", None),
    )
    return sandbox.settings(*given, saved)


def notify_check(target: str) -> str | None:
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
        problem = check_target(target)
        if problem:
            raise LoopdeckError(problem)
    return limits


def check_timeout(value: object, where: str) -> float:
    """An agent run's time limit, in seconds: a number above 0. `where` says where it was read
    (the option, the state file, a config file), so a bad value is found where it was typed."""
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


def workspace_of(args: argparse.Namespace) -> Workspace:
    """The loop's folder: `-C DIR`, else the nearest folder at or above here that holds a loop."""
    if args.workspace is not None:
        return Workspace(Path(args.workspace).resolve())
    return find_workspace()


def workspace_here(args: argparse.Namespace) -> Workspace:
    """The folder a new loop or an install goes into: `-C DIR`, else the current folder."""
    return Workspace(Path(args.workspace).resolve()) if args.workspace else Workspace(Path.cwd())


def fill(args: argparse.Namespace, saved: Any, keys: tuple[str, ...]) -> None:
    """Put the saved values into the options the command line left unset, each checked as the
    option would be (a notification target that cannot work is named with its file)."""
    for key in keys:
        value = saved.get(key)
        if value is None or getattr(args, key, None) is not None:
            continue
        if key == "notify":
            for target in value:
                problem = check_target(target)
                if problem:
                    raise LoopdeckError(f"{saved.where(key)}: {problem}")
        setattr(args, key, list(value) if isinstance(value, list) else value)


def ask_config(lines: list[str], shown: str) -> bool:
    """Ask the person at the terminal to confirm a workspace file's saved values."""
    print(f"{shown} names values nobody on this machine confirmed:", file=sys.stderr)
    for line in lines:
        print(f"  {line}", file=sys.stderr)
    try:
        return input("Use them? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def config_confirmer(args: argparse.Namespace) -> Callable[[list[str], str], bool]:
    """How `run` confirms a workspace file's saved values: `--yes`, else the person at the
    terminal; a headless run, or one with no terminal, confirms nothing."""

    def confirm(lines: list[str], shown: str) -> bool:
        if args.yes:
            return True
        if args.headless or not sys.stdin.isatty():
            return False
        return ask_config(lines, shown)

    return confirm

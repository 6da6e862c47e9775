"""The `loopdeck` command line as argparse defines it, one small module per group of verbs.

Apart from the verbs themselves (each names its function as `module:function`, imported when it
runs), so the shell completion, the CLI reference in the documentation and `--help` build the
whole parser without loading any verb: `build_parser()` is the one definition they all read.
"""

from __future__ import annotations

import argparse
from typing import cast

from loop.cli.definition import loops, monitor, report, run, setup, steering, temporal
from loop.cli.definition.base import VerbParser, Verbs, Version, WorkspaceVerbs

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The whole parser, every verb in the order `loopdeck --help` lists them."""
    parser = argparse.ArgumentParser(
        prog="loopdeck",
        description="Run, watch and steer autonomous coding-agent loops.",
    )
    parser.register("action", "parsers", Verbs)
    parser.add_argument(
        "-C",
        "--workspace",
        metavar="DIR",
        help="the project folder (default: the nearest folder at or above the current one "
        "that holds a loop, else the current folder)",
    )
    parser.add_argument(
        "--version", action=Version, nargs=0, help="show loopdeck's version and where it runs from, and exit"
    )
    verbs = parser.add_subparsers(
        dest="verb",
        metavar="VERB",
        action=WorkspaceVerbs,
        parser_class=cast(type[argparse.ArgumentParser], VerbParser),
    )
    loops.add(verbs)
    steering.add(verbs)
    loops.add_resume(verbs)
    steering.add_set_max(verbs)
    steering.add_undo(verbs)
    run.add(verbs)
    monitor.add(verbs)
    setup.add(verbs)
    loops.add_log(verbs)
    report.add(verbs)
    temporal.add(verbs)  # options on the verbs above too: it comes last
    return parser

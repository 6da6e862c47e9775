"""`loopdeck completion bash|zsh|fish`: a completion script made from the parser itself.

shtab writes it from the same argparse definition every verb is parsed with, so a new verb or
option completes without anyone keeping a second list. The script only lists names: nothing in
it runs loopdeck at each Tab (argcomplete's way, which would start Python on every key press).
"""

from __future__ import annotations

import argparse
import sys

import shtab

from loop.cli.definition import build_parser

SHELLS = ("bash", "zsh", "fish")
FOLDER_METAVARS = frozenset({"DIR", "D"})
FILE_METAVARS = frozenset({"P", "FILE"})


def script(shell: str) -> str:
    """The completion script for `shell`, for the `loopdeck` command."""
    if shell not in SHELLS:
        raise ValueError(f"no completion for {shell}")
    parser = build_parser()
    _mark_paths(parser)
    text: str = shtab.complete(parser, shell=shell)
    return text


def _mark_paths(parser: argparse.ArgumentParser) -> None:
    """Folders complete as folders and files as files (`-C DIR`, `--task-file P`), in every verb;
    a verb is described by its short help line (shtab would show its whole description)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                action.choices[choice.dest].description = choice.help
            for verb in set(action.choices.values()):
                _mark_paths(verb)
        elif action.metavar in FOLDER_METAVARS:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif action.metavar in FILE_METAVARS:
            action.complete = shtab.FILE  # type: ignore[attr-defined]


def cmd_completion(args: argparse.Namespace) -> int:
    sys.stdout.write(script(args.shell))
    return 0

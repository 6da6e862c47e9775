"""The parser's own parts: every verb's parser class, how a verb names its function, and
`-C DIR` after the verb. Parsing only: nothing here runs a verb."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, TypeAlias

import loop
from loop.cli.place import where_installed


def sentence(text: str) -> str:
    """A help line as the first sentence of a verb's `--help`."""
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", ")", "?", "!")) else text + "."


class Command:
    """A verb's function, named `module:function` and imported when the verb runs. The
    definition names the verbs without importing them, so the shell completion, the CLI
    reference and `--help` load no verb, and `loopdeck status` loads only its own
    (the runner's modules cost `status` about 40 ms when imported up front)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def resolve(self) -> Any:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)

    def __call__(self, args: argparse.Namespace) -> int:
        return int(self.resolve()(args))

    def __repr__(self) -> str:
        return f"Command({self.target!r})"


class Verbs(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Every verb's `--help` opens with a one-line description: its help line, unless it has
    a longer one of its own."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        text = kwargs.get("help")
        if text and text is not argparse.SUPPRESS and kwargs.get("description") in (None, text):
            kwargs["description"] = sentence(text)
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


class VerbParser(argparse.ArgumentParser):
    """A verb's parser: a mistake after the verb is reported with that verb's usage
    (`loopdeck log: error: ...`), not the top-level one argparse would print for an option it
    does not know."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", Verbs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:  # the innermost verb (`hook stop`, `temporal dev`) meets them first
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class WorkspaceVerbs(Verbs):
    """The top level's verbs: `-C DIR` after the verb too (`loopdeck status -C DIR`), as people
    type it. It leaves the one given before the verb alone when it is not given again
    (`SUPPRESS`: no default of its own)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        verb = super().add_parser(name, **kwargs)
        if name != "hook":
            verb.add_argument(
                "-C",
                "--workspace",
                metavar="DIR",
                default=argparse.SUPPRESS,
                help="the project folder (as before the verb)",
            )
        return verb


class Version(argparse.Action):
    """`loopdeck --version`: the version, and which loopdeck answers (a tool install or a
    clone, its folder and its Python)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        kind, folder = where_installed()
        how = "installed as a tool" if kind == "tool" else "a development clone"
        python = sys.version.split()[0]
        print(f"loopdeck {loop.__version__} ({how}: {folder}; Python {python} {sys.executable})")
        parser.exit()


VerbGroup: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What each group's `add(verbs)` receives: the top level's verbs."""

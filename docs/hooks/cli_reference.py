"""MkDocs hook: the CLI reference page is written from the argparse definition itself.

A page typed by hand drifts from the parser; this one cannot. `docs/cli.md` holds the marker
below; each verb (and each verb of a verb group, such as `hook stop`) becomes a section with
its usage and its options, read from `loop.cli.build_parser()`.
"""

from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- cli-reference -->"
WIDTH = 88  # the usage lines' width: fixed, so the page does not depend on the terminal


def _escape(text: str) -> str:
    """Help text is plain prose: keep Markdown from reading its `<...>` as HTML or `*` as emphasis."""
    return html.escape(" ".join(text.split()), quote=False).replace("*", "\\*")


def _sentence(text: str) -> str:
    """A help line as a sentence: a capital first, a full stop last."""
    text = _escape(text).strip()
    if not text:
        return ""
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=WIDTH)
    return formatter._expand_help(action) if action.help else ""


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _options(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(
            action, (argparse._HelpAction, argparse._SubParsersAction)
        ):
            continue
        if action.option_strings:
            metavar = ""
            if action.nargs != 0:
                metavar = " " + (
                    action.metavar
                    if isinstance(action.metavar, str)
                    else (action.dest.upper() if action.metavar is None else " ".join(action.metavar))
                )
                if action.choices and action.metavar is None:
                    metavar = " {" + ",".join(str(c) for c in action.choices) + "}"
            name = ", ".join(f"{s}{metavar}" for s in action.option_strings)
        else:
            name = action.metavar if isinstance(action.metavar, str) else action.dest
            if action.choices and action.metavar is None:
                name = "{" + ",".join(str(c) for c in action.choices) + "}"
        text = _escape(_help(parser, action))
        lines.append(f"- `{name}`" + (f": {text}" if text else ""))
    return lines


def _section(name: str, summary: str, parser: argparse.ArgumentParser, depth: int) -> list[str]:
    out = [f"{'#' * depth} `{parser.prog}`", ""]
    if summary:
        out += [_sentence(summary), ""]
    if parser.description and _sentence(parser.description) != _sentence(summary):
        out += [_sentence(parser.description), ""]
    out += ["```text", _usage(parser), "```", ""]
    options = _options(parser)
    if options:
        out += [*options, ""]
    sub = _subcommands(parser)
    if sub is not None:
        helps = {a.dest: a.help or "" for a in sub._choices_actions}
        for child_name, child in sub.choices.items():
            out += _section(child_name, helps.get(child_name, ""), child, depth + 1)
    return out


def reference(parser: argparse.ArgumentParser) -> str:
    """The whole reference: the global options, then every verb in the parser's order."""
    out = ["## Global options", "", "```text", _usage(parser), "```", "", *_options(parser), ""]
    sub = _subcommands(parser)
    if sub is not None:
        helps = {a.dest: a.help or "" for a in sub._choices_actions}
        for name, child in sub.choices.items():
            out += _section(name, helps.get(name, ""), child, 2)
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the marker in the CLI page with the reference, and only there."""
    if MARKER not in markdown:
        return markdown
    root = str(Path(config["config_file_path"]).resolve().parent)
    if root not in sys.path:
        sys.path.append(root)  # the checkout, when loopdeck is not installed; an install wins
    from loop.cli import build_parser

    return markdown.replace(MARKER, reference(build_parser()))

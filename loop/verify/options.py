"""Which options of each allowed program run code, load plugins, set configuration, reach the
network, or read and write outside the workspace: refused by `loop/verify.py` unless a person
allowed that exact command.

A test command runs the workspace's own code (conftest.py, a Makefile, build.rs, the scripts of
package.json, ./node_modules/.bin): that is what it is for, and whether it may run at all is
decided by trust (a person confirming the loop's commands with `loopdeck trust`). What is
refused here is what the *command line* adds to that: a plugin, interpreter or shell named on it,
configuration set on it, a file read or written outside the workspace. So, per program:

* an option that runs code, loads a module, sets configuration or reaches the network is
  refused whatever its value (a few values are known harmless: `-p no:cacheprovider`);
* an option that names a file to read or write, and every operand that is a path, must resolve
  inside the workspace (symlinks and `..` resolved);
* where the option surface is too large to list what is risky (npm, pnpm and yarn read any
  `--name=value` as their configuration; jest, vitest and eslint), only options known to be
  harmless are accepted; a script's own arguments go after `--`, where they are passed on with
  no shell syntax and no path out of the workspace.

Options are read as each program reads them (`loop/verify_argv.py`): bundled short flags,
abbreviated long options, values attached or in the next word, `--`. The tables say, one line
per option, `KIND ARG NAMES… | what it does` (kinds and arguments are described there).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from loop.verify import node as verify_node
from loop.verify import python as verify_python
from loop.verify import tools as verify_tools
from loop.verify.argv import Context, Rule, workspace_root

RULES: dict[str, Rule] = {**verify_python.RULES, **verify_node.RULES, **verify_tools.RULES}
"""Each program with rules, by the name it runs as."""

_ALIASES = {"gmake": "make", "gradlew": "gradle", "mvnw": "mvn"}
_PYTHONS = re.compile(r"python(?:3(?:\.\d+)?)?")


def program(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The program that really reads the options, and its arguments: `python -m pytest X` is
    pytest X, `bundle exec rspec X` is rspec X, `npx jest X` is jest X."""
    name = os.path.basename(argv[0])
    args = list(argv[1:])
    wrapped = (_PYTHONS.fullmatch(name) and args[:1] == ["-m"]) or (name == "bundle" and args[:1] == ["exec"])
    if wrapped and len(args) >= 2:
        name, args = args[1], args[2:]
    elif name == "npx" and args and not args[0].startswith("-"):
        name, args = args[0], args[1:]
    return _ALIASES.get(name, name), args


def refusal(argv: Sequence[str], matched: Sequence[str], cwd: str | None) -> str | None:
    """Why the options or paths of `argv` are refused (`matched`: the allow entry it matched,
    as words), or None. A program with no rules here passes: a person allowed it."""
    if not argv:
        return None
    name, args = program(argv)
    for word in argv[1:]:
        if word.startswith("@") and len(word) > 1:
            # ruff, tsc, javac, gcc and argparse programs read more arguments from `@FILE`,
            # where no rule here sees them
            return f"names an argument file ({word}), which {name} reads more options from; give them instead"
    root = workspace_root(cwd)
    if os.path.basename(argv[0]) == "npx" and not os.path.exists(
        os.path.join(root, "node_modules", ".bin", name)
    ):
        # npx fetches a package it does not find and runs it, without asking when no terminal is there
        return f"would download and run {name!r} (npx, and it is not in this workspace's node_modules)"
    rule = RULES.get(name)
    return rule(args, matched, Context(root, name)) if rule is not None else None

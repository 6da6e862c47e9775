"""The agent CLIs loopdeck drives, each behind one small adapter.

`--agent claude|codex|gemini|opencode` picks a CLI with a default command fit for unattended
work in the workspace; any other `--agent CMD` is matched to its CLI by program name (the base
name of its first word, past `env VAR=…`, `npx` and the like), or named with `--agent-format`,
else read as plain text. Each adapter (`claude`, `codex`, `gemini`, `opencode`, `generic`) reads
its CLI's output into the same `Facts` (`loop.agents.base`); `loop.agents.turn.judge` makes of
them the engine's `Turn`, the one judgement of a turn every driver shares.
"""

from __future__ import annotations

import os
import shlex

from loop.agents.base import Adapter, Facts
from loop.agents.claude import Claude
from loop.agents.codex import Codex
from loop.agents.gemini import Gemini
from loop.agents.generic import Text
from loop.agents.opencode import OpenCode
from loop.agents.output import whole_json
from loop.core.limits import duration_s

__all__ = [
    "ADAPTERS",
    "FORMATS",
    "NAMES",
    "Adapter",
    "Choice",
    "Facts",
    "adapter_for",
    "detect",
    "get",
    "live_line",
    "resolve",
]

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (Claude(), Codex(), Gemini(), OpenCode(), Text())}
NAMES = ("claude", "codex", "gemini", "opencode")
"""What `--agent NAME` accepts: a CLI with a default command."""
FORMATS = (*NAMES, "text")
"""What `--agent-format` accepts: how to read the output of a full command."""
_WRAPPERS = frozenset({"env", "npx", "bunx", "pnpx", "nice", "nohup", "exec", "command", "stdbuf", "timeout"})


class Choice:
    """An agent as given on the command line, resolved: the command to run and its adapter."""

    def __init__(self, command: str, adapter: Adapter) -> None:
        self.command = command
        self.adapter = adapter

    def __repr__(self) -> str:
        return f"Choice({self.command!r}, {self.adapter.name})"


def get(name: str) -> Adapter:
    return ADAPTERS[name]


def program(command: str) -> str | None:
    """The program a command runs: the base name of its first word that is not a wrapper
    (`env`, `npx`, …), an assignment or an option; without a version (`codex@0.171.0`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for word in words:
        if word.startswith("-") or ("=" in word and not word.startswith(("/", "."))):
            continue
        if duration_s(word) is not None:  # `timeout 30s codex …`
            continue
        name = os.path.basename(word.rstrip("/"))
        name = name.split("@", 1)[0] if not name.startswith("@") else name
        if name in _WRAPPERS or not name:
            continue
        return name
    return None


def adapter_for(command: str, fmt: str | None = None) -> Adapter:
    """The adapter for a full command: the named format, else its program's CLI, else text."""
    if fmt and fmt in ADAPTERS:
        return ADAPTERS[fmt]
    name = program(command)
    for adapter in ADAPTERS.values():
        if name in adapter.programs:
            return adapter
    return ADAPTERS["text"]


def resolve(agent: str, fmt: str | None = None) -> Choice:
    """`--agent` as given: a CLI's name means its default command; anything else is a command."""
    if agent in NAMES:
        adapter = ADAPTERS[agent]
        return Choice(adapter.default_command, ADAPTERS.get(fmt or "", adapter))
    return Choice(agent, adapter_for(agent, fmt))


def in_sandbox(choice: Choice, boxed: bool) -> str:
    """The command a turn runs: in loopdeck's sandbox, a CLI's default command without the
    CLI's own sandbox (`Adapter.boxed_command`); otherwise the command chosen."""
    adapter = choice.adapter
    if boxed and adapter.boxed_command and choice.command == adapter.default_command:
        return adapter.boxed_command
    return choice.command


def install_hint(program_name: str) -> str | None:
    """How to install the CLI a program name belongs to, None for one loopdeck does not know."""
    for adapter in ADAPTERS.values():
        if program_name in adapter.programs and adapter.install:
            return f"install {adapter.label} ({adapter.install})"
    return None


def detect(output: str, lines: int = 200) -> Adapter:
    """Which CLI printed `output`: the adapter that recognises most of its last JSON lines
    (`text` when none does). For readers that were not told the agent (a worker's log)."""
    votes = dict.fromkeys(NAMES, 0)
    for line in output.splitlines()[-lines:]:
        if not line.lstrip().startswith("{"):
            continue
        for name in NAMES:
            if ADAPTERS[name].live_line(line) is not None:
                votes[name] += 1
                break
    best = max(NAMES, key=lambda name: votes[name])
    if votes[best]:
        return ADAPTERS[best]
    whole = whole_json(output) if "{" in output else None  # `gemini --output-format json`, pretty-printed
    if whole is not None and "response" in whole and "stats" in whole:
        return ADAPTERS["gemini"]
    return ADAPTERS["text"]


def live_line(line: str, hint: str | None = None) -> str | None:
    """One line of an iteration log as a person reads it: by the adapter named `hint` (the
    iteration's agent) first, else by whichever CLI printed it; a text line as it is; None for
    a JSON line nobody knows. See `Adapter.live_line` for the marks."""
    order = [ADAPTERS[hint]] if hint in ADAPTERS else []
    order += [a for a in ADAPTERS.values() if a.name != hint and a.name != "text"]
    for adapter in order:
        shown = adapter.live_line(line)
        if shown is not None:
            return shown
    return ADAPTERS["text"].live_line(line)

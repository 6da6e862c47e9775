"""`loopdeck init`: what a person's own project needs before its first loop.

A task file to fill in (TODO.md, the checklist the loop works through), the project's config
(`.loopdeck.toml`, every value commented out, so it changes nothing until a line is uncommented),
and with `--hooks` the Claude Code hooks, by the very code `loopdeck install` runs. It only ever
creates files: one that exists already stops it before anything is written.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path

from loop.cli.config import BUILT_IN
from loop.cli.installing import install_hooks
from loop.cli.options import workspace_here
from loop.core.errors import LoopdeckError
from loop.store.config import KEYS, PROJECT_NAME

TASK_FILE = "TODO.md"
PROMPT = "Work through the tasks in TODO.md"

TASKS = """\
# Tasks

One task per line, as a checklist item. The agent works through the unticked items and ticks
each one off (`[x]`) when it is done; the loop ends once none is left. Replace the two items
below with your own, each small enough for one turn of the agent.

- [ ] Describe the first task here, with what "done" means (a test passes, a command works)
- [ ] And the next one
"""

MEANINGS: dict[str, tuple[str, str | None]] = {
    "agent": ("claude, codex, gemini, opencode, or a full agent command", None),
    "fallback_agent": ("the agent to use while the first is held by a usage limit", '"codex"'),
    "notify": ("whom to tell when a person is needed: desktop, a webhook URL, cmd:PROGRAM", '["desktop"]'),
    "verify": ("commands run after every iteration; a failure goes back to the agent", '["make test"]'),
    "verify_allow": ("exact commands allowed beyond the built-in allowlist", '["make test"]'),
    "max_iterations": ("escalate after this many iterations (0: no limit)", None),
    "max_cost": ("escalate when the agent's reported cost reaches this many US dollars", "5.0"),
    "stuck_after": ("escalate after this many working turns without progress", None),
    "same_error_after": ("escalate after the same error this many times", None),
    "iteration_timeout": ("seconds before an agent run is stopped", None),
    "retries": ("retries of a failed agent run", None),
    "sandbox": ("run each agent turn in a sandbox: auto, on or off", None),
    "sandbox_net": ("whether an agent in the sandbox reaches the network", None),
    "sandbox_env": (
        "more variables passed into the sandbox (the agents' own keys always are)",
        '["MY_TOKEN"]',
    ),
    "worktree_copy": ("untracked files copied into each worker's new worktree", '[".env"]'),
    "worktree_setup": ("commands run once in each worker's new worktree, in the sandbox", '["npm ci"]'),
    "port_base": ("worker N finds port_base + ports_per_worker × N in LOOPDECK_PORT_BASE", None),
    "ports_per_worker": ("how many ports each worker's slot spans", None),
}
"""What each configuration key means, and an example value for a key with no built-in default."""


def _toml(value: object) -> str:
    """A default as TOML writes it (strings, numbers, booleans and lists of strings only)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def config_text() -> str:
    """The project config: every key loopdeck reads, commented out, with its option's name."""
    lines = [
        "# loopdeck's defaults for this project: what `loopdeck run` and /orchestrator-loop use when",
        "# the command line does not say. The command line wins over this file, and this file over",
        "# your own (~/.config/loopdeck/config.toml). Each line shows the built-in default, or an",
        "# example where there is none: uncomment a line to use it. Since this file travels with",
        "# the repository, loopdeck asks on each machine before using its values (`loopdeck config`",
        "# shows them, `loopdeck config --trust` confirms them).",
        "",
    ]
    for key, (_check, _expects, option) in KEYS.items():
        meaning, example = MEANINGS[key]
        default = BUILT_IN[key]
        value = example if default is None or default == [] else _toml(default)
        lines.append(f"# {meaning} ({option})")
        lines.append(f"# {key} = {value}")
    return "\n".join(lines) + "\n"


def _create(path: Path, text: str) -> None:
    """Write a new file; an existing one (or a link in its place) is never touched."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def cmd_init(args: argparse.Namespace) -> int:
    ws = workspace_here(args)
    files = ((ws.root / TASK_FILE, TASKS), (ws.root / PROJECT_NAME, config_text()))
    there = [path for path, _text in files if path.exists() or path.is_symlink()]
    if there:
        names, it = (" and ".join(p.name for p in there), "them") if len(there) > 1 else (there[0].name, "it")
        raise LoopdeckError(
            f"{names} already {'exist' if it == 'them' else 'exists'} in {ws.root}: init only creates "
            f"new files, so nothing was written (edit {it}, or move {it} aside and run init again)"
        )
    for path, text in files:
        _create(path, text)
    print(f"loopdeck: wrote {ws.root / TASK_FILE}: your tasks, one checklist line each")
    print(f"loopdeck: wrote {ws.root / PROJECT_NAME}: this project's defaults, all commented out")
    if args.hooks:
        install_hooks(ws)
    here = "" if ws.root == Path.cwd().resolve() else f" -C {shlex.quote(str(ws.root))}"
    print(f"Next: write your tasks in {TASK_FILE}, then run the loop:")
    print(f"  loopdeck{here} run {shlex.quote(PROMPT)} --task-file {TASK_FILE}")
    print("(add --agent codex, gemini or opencode to use another agent than claude)")
    if args.hooks:
        print("or, inside Claude Code in this folder, type:")
        print(f"  /orchestrator-loop {PROMPT} -- --task-file {TASK_FILE}")
    return 0

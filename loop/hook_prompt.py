"""Driver of the slash commands: Claude Code's UserPromptSubmit hook (`loopdeck hook prompt`).

A slash command file can only reach loopdeck through a ```! block, and Claude Code pastes the
user's `$ARGUMENTS` into that block as text before bash reads it: an apostrophe breaks the
command and `$(…)` runs. So the command files written by `loopdeck install` run nothing; this
hook does the work instead. Claude Code gives it the typed text, untouched, as JSON on stdin
(`{"prompt": "/orchestrator-loop …", …}`); it is parsed here, and loopdeck is called in process
with an argv: no shell ever reads the user's words.

Answers: nothing for every prompt that is not one of ours (the common case, and fast); for ours,
`additionalContext` telling the model what loopdeck did; and when loopdeck refused (a loop is
already running, a bad option), `{"decision": "block", "reason": …}` so the prompt never reaches
the model and the user reads why. Like the Stop hook it always exits 0 with one JSON object or
nothing on stdout.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

START = "orchestrator-loop"
COMMANDS = (START, "loop-status", "loop-pause", "loop-cancel")
MAX_STDIN = 16 * 1024 * 1024

VALUE_OPTIONS = ("max-iterations", "completion-promise", "task-file", "github-project", "verify")
FLAG_OPTIONS = ("no-tasks", "no-github", "force")
_VALUE = r"\"[^\"]*\"|'[^']*'|[^\s\"']\S*"
_TRAILING_VALUE = re.compile(
    rf"(?:^|\s+)--(?P<name>{'|'.join(VALUE_OPTIONS)})(?:\s+|=)(?P<value>{_VALUE})\s*\Z", re.DOTALL
)
_TRAILING_FLAG = re.compile(rf"(?:^|\s+)--(?P<name>{'|'.join(FLAG_OPTIONS)})\s*\Z", re.DOTALL)


@dataclass
class Invocation:
    """A typed slash command of ours: its name, and for /orchestrator-loop the prompt and options."""

    command: str
    prompt: str = ""
    options: list[str] = field(default_factory=list)


def _split_command(text: str) -> tuple[str, str]:
    body = text[1:]
    match = re.match(r"(\S+)(?:\s(.*))?\Z", body, re.DOTALL)
    if match is None:
        return "", ""
    return match.group(1), match.group(2) or ""


def parse(text: str) -> Invocation | None:
    """`/orchestrator-loop PROMPT [--option value]…` → the command, the prompt byte-exact, the options.

    Options are read only from the end of the text, so the prompt keeps every character the
    user typed (quotes, `$( )`, backticks, newlines); a value may be quoted with "…" or '…'.
    """
    if not text.startswith("/"):
        return None
    name, rest = _split_command(text)
    if name not in COMMANDS:
        return None
    if name != START:
        return Invocation(name)
    options: list[str] = []
    while True:
        value = _TRAILING_VALUE.search(rest)
        flag = None if value else _TRAILING_FLAG.search(rest)
        if value is not None:
            raw = value.group("value")
            if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
                raw = raw[1:-1]
            options[:0] = [f"--{value.group('name')}", raw]
            rest = rest[: value.start()]
        elif flag is not None:
            options[:0] = [f"--{flag.group('name')}"]
            rest = rest[: flag.start()]
        else:
            break
    return Invocation(name, rest.strip(), options)


def _loopdeck(argv: list[str]) -> tuple[int, str]:
    """Run `loopdeck ARGV` in this process (argv, never a shell); exit status and its output."""
    from loop import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue().strip()


def ours(payload: Mapping[str, Any]) -> Invocation | None:
    """The slash command of ours this prompt is, if any."""
    text = payload.get("prompt")
    return parse(text.lstrip()) if isinstance(text, str) else None


def _adopt(root: Path, payload: Mapping[str, Any]) -> None:
    """Bind a paused loop to the session that typed `/orchestrator-loop` to resume it.

    The Stop hook ignores every session but the loop's own (so one loop never hijacks another
    session in the same folder); a person resuming from a new session means this one, and
    without the rebinding the queued resume would never be applied."""
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        return
    from loop import engine, writer
    from loop.journal import Journal
    from loop.paths import Workspace
    from loop.state import StateStore
    from loop.timeutil import utcnow

    ws = Workspace(root)
    store = StateStore(ws)
    if not store.exists():
        return
    transcript = payload.get("transcript_path")
    with store.locked():
        state = store.read()
        if state is None:
            return
        now = utcnow()
        result = engine.adopt(state, session, transcript if isinstance(transcript, str) else None, now)
        writer.carry_out(ws, store, Journal(ws.journal), state, result, now)


def handle(payload: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any] | None:
    """Act on one submitted prompt; the JSON to print, or None when the prompt is not ours."""
    invocation = ours(payload)
    if invocation is None:
        return None
    cwd = payload.get("cwd")
    root = env.get("CLAUDE_PROJECT_DIR") or (cwd if isinstance(cwd, str) and cwd else os.getcwd())
    base = ["-C", str(Path(root).resolve())]
    if invocation.command == START:
        if not invocation.prompt and not invocation.options:
            _adopt(Path(root).resolve(), payload)
            argv = [*base, "resume", "--yes", "--reason", "resumed from /orchestrator-loop"]
        else:
            argv = [*base, "start", *invocation.options, "--", invocation.prompt]
    elif invocation.command == "loop-pause":
        argv = [*base, "pause", "--reason", "paused from /loop-pause"]
    elif invocation.command == "loop-cancel":
        argv = [*base, "stop", "--reason", "cancelled from /loop-cancel"]
    else:
        argv = [*base, "status"]
    code, output = _loopdeck(argv)
    if code != 0:
        return {"decision": "block", "reason": f"/{invocation.command}: {output or f'exit {code}'}"[:9000]}
    return {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": f"loopdeck (/{invocation.command}) says:\n{output}"[:9000],
        }
    }


def main(stdin: Any = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        raw = (stdin or sys.stdin.buffer).read(MAX_STDIN + 1)
        payload = json.loads(raw) if len(raw) <= MAX_STDIN else None
    except (OSError, ValueError, UnicodeDecodeError):
        return 0  # not a prompt we can read: certainly not ours to stop
    if not isinstance(payload, dict):
        return 0
    try:
        out = handle(payload, env)
    except Exception as exc:  # one of ours went wrong: say so rather than let the model guess
        out = {
            "decision": "block",
            "reason": f"loopdeck: the prompt hook failed ({type(exc).__name__}: {exc})",
        }
    if out is not None:
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return 0

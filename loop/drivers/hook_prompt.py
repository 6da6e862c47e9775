"""Driver of the slash commands: Claude Code's UserPromptSubmit hook (`loopdeck hook prompt`).

A slash command file can only reach loopdeck through a ```! block, and Claude Code pastes the
user's `$ARGUMENTS` into that block as text before bash reads it: an apostrophe breaks the
command and `$(…)` runs. So the command files written by `loopdeck install` run nothing; this
hook does the work instead. Claude Code gives it the typed text, untouched, as JSON on stdin
(`{"prompt": "/orchestrator-loop …", …}`); it is read here and loopdeck's functions are called
with it as data: no shell, and no command-line parser, ever reads the user's words.

What a person types is also what they may have pasted: `/orchestrator-loop Stop using git push
--force` is a sentence, not an option. So the text is read one of two ways, told apart by how it
starts. Text that starts with a quote or with an option (`"My task" --max-iterations 50`,
`--completion-promise "SPRINT COMPLETE"`) is a command line: shell-like words (`shlex`, never a
shell), the quoted and plain words the prompt, `--name value` the options. Any other text is a
sentence: the prompt byte for byte, with options only after a standalone ` -- ` that ends it
(`/orchestrator-loop PROMPT -- --task-file TODO.md`); text that starts with a quote but cannot be
split into words (an unclosed quote) is a sentence too. Options that run or send something
(`--verify`, `--notify`, `--force`…) are never taken from a chat: the person is shown the
command to run in a terminal instead. Something that looks like an option in a sentence is left
there, and the person is told.

Answers: nothing for every prompt that is not one of ours (the common case, and fast); for ours,
`additionalContext` telling the model what loopdeck did (and `systemMessage`, one line for the
person, when something needs saying); and when loopdeck refused, `{"decision": "block",
"reason": …}` so the prompt never reaches the model and the person reads why. Like the Stop
hook it always exits 0 with one JSON object or nothing on stdout.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loop.core.errors import LoopdeckError
from loop.store.paths import Workspace

if TYPE_CHECKING:
    from loop.drivers.defaults import Defaults

START = "orchestrator-loop"
COMMANDS = (START, "loop-status", "loop-pause", "loop-cancel")
MAX_STDIN = 16 * 1024 * 1024

VALUE_OPTIONS = (
    "max-iterations",
    "completion-promise",
    "task-file",
    "github-project",
    "max-cost",
    "stuck-after",
    "same-error-after",
)
"""Options a chat may give: they shape the loop, and run or send nothing."""
FLAG_OPTIONS = ("no-tasks", "no-github")
TERMINAL_ONLY = ("verify", "verify-allow", "notify", "force", "agent", "audit", "audit-agent", "yes")
"""Options that run a command, tell a target, or replace a loop: only from a terminal, where a
person types them, never from text that may have been pasted into a chat."""
SEPARATOR = re.compile(r"(?:^|\s)--(?:\s|\Z)")
_OPTION_WORD = re.compile(r"(?<!\S)--([a-z][a-z-]*)")


@dataclass
class Invocation:
    """A typed slash command of ours: its name, and for /orchestrator-loop the prompt and options."""

    command: str
    prompt: str = ""
    options: dict[str, str | bool] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    """Option-like words left in the prompt (no ` -- ` before them): the person is told."""
    problem: str | None = None
    """Why the options after ` -- ` cannot be taken (the prompt is then not started)."""
    refused: list[str] = field(default_factory=list)
    """Options after ` -- ` that only a terminal takes (`--verify`…)."""


def _split_command(text: str) -> tuple[str, str]:
    body = text[1:]
    match = re.match(r"(\S+)(?:\s(.*))?\Z", body, re.DOTALL)
    if match is None:
        return "", ""
    return match.group(1), match.group(2) or ""


DEFAULT_PROMPT = "Work through the pending tasks in this project's task sources, one at a time."
"""The prompt of a loop started with options alone (`/orchestrator-loop --completion-promise
"SPRINT COMPLETE"`): the work is whatever the task sources hold."""


def _options(tail: str) -> tuple[dict[str, str | bool], list[str], str | None]:
    """The options after ` -- `, those only a terminal takes, and why they cannot be taken."""
    try:
        words = shlex.split(tail)
    except ValueError as exc:
        return {}, [], f"the options after ' -- ' cannot be read ({exc})"
    return _read_options(words, " after ' -- '", "to keep ' -- …' in the prompt, end the prompt with ' --'")


def _read_options(
    words: list[str], where: str = "", hint: str = ""
) -> tuple[dict[str, str | bool], list[str], str | None]:
    """`words`, every one an option or an option's value: the options, those only a terminal
    takes, and why they cannot be taken (`where` and `hint` say it for the form typed)."""
    options: dict[str, str | bool] = {}
    refused: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, value = word[2:].partition("=") if word.startswith("--") else ("", "", "")
        if name in TERMINAL_ONLY:
            refused.append(f"--{name}")
            i += 2 if not eq and name not in ("force", "yes") and i + 1 < len(words) else 1
            continue
        if name in FLAG_OPTIONS and not eq:
            options[name] = True
            i += 1
            continue
        if name in VALUE_OPTIONS:
            if not eq:
                if i + 1 >= len(words):
                    return {}, [], f"--{name} needs a value"
                value = words[i + 1]
                i += 1
            options[name] = value
            i += 1
            continue
        known = ", ".join(f"--{o}" for o in (*VALUE_OPTIONS, *FLAG_OPTIONS))
        return (
            {},
            [],
            f"{word!r}{where} is not an option /orchestrator-loop takes ({known})"
            + (f"; {hint}" if hint else ""),
        )
    if refused:
        return options, refused, f"{', '.join(refused)} can only be given in a terminal"
    return options, [], None


_COMMAND_LINE = re.compile(r"[\"']|--[a-z]")
"""How a command line starts (a quote, or an option such as `--max-iterations`); any other text
is a sentence."""
COMMAND_LINE_CHARS = 64 * 1024
"""Longer text is pasted, not a command line someone typed (and `shlex` reads ~1 MB a second)."""


def _command_line(name: str, rest: str) -> Invocation | None:
    """`"PROMPT" --option value …` or `--option value …`, read as shell-like words: the prompt
    is the words that are neither an option nor its value (a standalone `--` is skipped, so the
    ` -- ` form reads the same); None when the text is a sentence, or cannot be split into words."""
    text = rest.strip()
    if len(text) > COMMAND_LINE_CHARS or not _COMMAND_LINE.match(text):
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None  # an unclosed quote (`"Save" doesn't work`): a sentence, as typed
    prompt: list[str] = []
    options: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            continue
        if not word.startswith("--"):
            prompt.append(word)
            i += 1
            continue
        option, eq, _value = word[2:].partition("=")
        takes_value = option in VALUE_OPTIONS or (option in TERMINAL_ONLY and option not in ("force", "yes"))
        step = 2 if takes_value and not eq and i + 1 < len(words) else 1
        options += words[i : i + step]
        i += step
    found, refused, problem = _read_options(options)
    return Invocation(name, " ".join(prompt), found, [], problem, refused)


def parse(text: str) -> Invocation | None:
    """`/orchestrator-loop "PROMPT" [OPTIONS]`, `/orchestrator-loop OPTIONS` (shell-like words)
    or `/orchestrator-loop SENTENCE [-- OPTIONS]` → the command, the prompt, the options."""
    if not text.startswith("/"):
        return None
    name, rest = _split_command(text)
    if name not in COMMANDS:
        return None
    if name != START:
        return Invocation(name)
    words = _command_line(name, rest)
    if words is not None:
        return words
    separators = list(SEPARATOR.finditer(rest))
    if separators:
        last = separators[-1]
        tail = rest[last.end() :]
        if not tail.strip() or tail.lstrip().startswith("--"):
            options, refused, problem = _options(tail) if tail.strip() else ({}, [], None)
            prompt = rest[: last.start()].strip()
            return Invocation(name, prompt, options, _kept(prompt), problem, refused)
    prompt = rest.strip()
    return Invocation(name, prompt, {}, _kept(prompt))


def _kept(prompt: str) -> list[str]:
    known = (*VALUE_OPTIONS, *FLAG_OPTIONS, *TERMINAL_ONLY)
    return sorted({f"--{m.group(1)}" for m in _OPTION_WORD.finditer(prompt) if m.group(1) in known})


def ours(payload: Mapping[str, Any]) -> Invocation | None:
    """The slash command of ours this prompt is, if any."""
    text = payload.get("prompt")
    return parse(text.lstrip()) if isinstance(text, str) else None


# --- the commands --------------------------------------------------------------------------------


def _terminal_command(root: Path, invocation: Invocation) -> str:
    """The `loopdeck start` a person can run in a terminal for what they typed."""
    argv = ["loopdeck", "-C", str(root), "start"]
    for name, value in invocation.options.items():
        argv += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    for option in invocation.refused:
        argv += [option] if option in ("--force", "--yes") else [option, option.removeprefix("--").upper()]
    return shlex.join([*argv, "--", invocation.prompt or "PROMPT"])


# The verbs below import what they act with (the engine, the state, the trust records, the
# start and resume drivers) inside their functions: this hook runs on every prompt a person
# submits, almost none of them ours, and importing those at the top cost each prompt ~130 ms
# (measured as whole processes on a 2-core machine).


def _start(root: Path, invocation: Invocation) -> tuple[list[str], str | None]:
    """Start the loop a person typed; the lines for the model and one for the person."""
    from loop.drivers import defaults
    from loop.drivers.start import Request, start_loop

    options = invocation.options

    def number(name: str, default: int) -> int:
        value = options.get(name)
        if value is None:
            return default
        try:
            return int(str(value))
        except ValueError:
            raise LoopdeckError(f"--{name} takes a whole number, not {value!r}") from None

    limits: dict[str, int] = {}
    for name in ("stuck-after", "same-error-after"):
        if name in options:
            limits[name.replace("-", "_")] = number(name, 0)
            if limits[name.replace("-", "_")] < 1:
                raise LoopdeckError(f"--{name} must be 1 or more")
    if "max-cost" in options:
        try:
            cost = float(str(options["max-cost"]))
        except ValueError:
            raise LoopdeckError(f"--max-cost takes US dollars, not {options['max-cost']!r}") from None
        if not cost > 0:
            raise LoopdeckError("--max-cost must be more than 0 (US dollars)")
        limits["max_cost_micro_usd"] = round(cost * 1_000_000)
    promise = options.get("completion-promise")
    project = options.get("github-project")
    task_file = options.get("task-file")
    saved = _saved(root, options, limits)
    request = Request(
        invocation.prompt or DEFAULT_PROMPT,
        max_iterations=number("max-iterations", saved.get("max_iterations", 100)),
        completion_promise=str(promise) if promise else "null",
        task_file=str(task_file) if task_file else None,
        check_tasks=not options.get("no-tasks"),
        check_github=not options.get("no-github"),
        github_project=str(project) if project else None,
        verify=list(saved.get("verify", [])),
        verify_allow=list(saved.get("verify_allow", [])),
        limits={**defaults.limits(saved), **limits},
        notify=list(saved.get("notify", [])),
    )
    _state, lines = start_loop(Workspace(root), request, "/orchestrator-loop")
    note = None
    if invocation.kept:
        words = ", ".join(invocation.kept)
        note = (
            f"loopdeck: {words} stayed part of the prompt (to give options, quote the prompt: "
            '/orchestrator-loop "PROMPT" --task-file TODO.md, or end it with -- --task-file TODO.md)'
        )
        lines.append(f"{words} in the request is part of the task text, not a loopdeck option.")
    return lines, note


def _saved(root: Path, options: Mapping[str, Any], limits: Mapping[str, int]) -> Defaults:
    """The saved defaults (configuration files) for what the typed command left unset: the
    person's own, and a workspace file's only once confirmed from a terminal (nobody can be
    asked here; the prompt is blocked with the line saying how)."""
    from loop.drivers import defaults
    from loop.drivers.notify import check_target

    wanted = ["verify", "verify_allow", "notify"]
    if "max-iterations" not in options:
        wanted.append("max_iterations")
    given = {"max_cost" if k == "max_cost_micro_usd" else k for k in limits}
    wanted += [k for k in ("max_cost", "stuck_after", "same_error_after") if k not in given]
    saved = defaults.settle(Workspace(root), wanted, by="/orchestrator-loop")
    for target in saved.get("notify", []):
        problem = check_target(target)
        if problem:
            raise LoopdeckError(f"{saved.where('notify')}: {problem}")
    return saved


def _resume(root: Path, payload: Mapping[str, Any]) -> list[str]:
    """`/orchestrator-loop` alone: resume the loop here, from this session, if a person here
    confirmed it; a loop nobody here confirmed is confirmed from a terminal, never a chat."""
    from loop import trust
    from loop.core import engine
    from loop.drivers import classify, resume
    from loop.store import control

    ws = Workspace(root)
    found = classify.read(ws)
    if found.kind == "corrupt":
        raise LoopdeckError(f"{found.error}; `loopdeck resume` in a terminal restores it")
    state = found.state
    if state is None:
        raise LoopdeckError(f"no loop in {root} to resume")
    pending = trust.unconfirmed(ws, state)
    if pending:
        listed = engine.unconfirmed_line(pending)
        raise LoopdeckError(
            f"the loop in {root} names what nobody on this machine confirmed ({listed}); "
            "review and confirm it from a terminal outside this session: loopdeck trust"
        )
    _adopt(ws, payload)
    found = classify.read(ws)
    if found.kind == "live" or (found.kind in ("paused", "waiting") and found.driver_alive):
        from loop.trust import key  # a person typed it (`handle` checked): signed

        command = control.queue(
            ws,
            "resume",
            source="slash",
            reason="resumed from /orchestrator-loop",
            key=key.load(ws.root, create=True),
        )
        return [f"resume queued (id {command.id}); it applies at this session's next Stop"]
    if found.kind not in engine.RESUMABLE:
        raise LoopdeckError(f"nothing to resume: the loop in {root} is {found.kind}")
    _seen, new = resume.carry_out(ws, found.kind)
    if new is None:
        raise LoopdeckError("the loop changed meanwhile; type /orchestrator-loop again")
    return [f"loop resumed at iteration {new.iteration}", *resume.next_steps(ws, new)]


def _adopt(ws: Any, payload: Mapping[str, Any]) -> None:
    """Bind a paused loop to the session that typed `/orchestrator-loop` to resume it.

    The Stop hook ignores every session but the loop's own (so one loop never hijacks another
    session in the same folder); a person resuming from a new session means this one, and
    without the rebinding the queued resume would never be applied."""
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        return
    from loop.core import engine
    from loop.core.timeutil import utcnow
    from loop.drivers import writer
    from loop.store.journal import Journal
    from loop.store.state import StateStore

    store = StateStore(ws)
    transcript = payload.get("transcript_path")
    with store.locked():
        state = store.read()
        if state is None:
            return
        now = utcnow()
        result = engine.adopt(state, session, transcript if isinstance(transcript, str) else None, now)
        writer.carry_out(ws, store, Journal(ws.journal), state, result, now)


def _steer(root: Path, kind: str, reason: str) -> list[str]:
    from loop.store import control
    from loop.store.state import StateStore

    ws = Workspace(root)
    state = StateStore(ws).read()
    if state is None or not state.active:
        raise LoopdeckError(f"no active loop in {root}")
    from loop.trust import key  # a person typed it (`handle` checked): signed

    command = control.queue(
        ws, kind, source="slash", reason=reason, iteration=state.iteration, key=key.load(ws.root, create=True)
    )
    return [f"{kind} queued (id {command.id}); it applies at the agent's next Stop"]


def _status(root: Path) -> list[str]:
    from loop.views.status_text import render

    code, lines, errors = render(Workspace(root))
    if code != 0:
        raise LoopdeckError("; ".join(errors))
    return lines


def handle(payload: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any] | None:
    """Act on one submitted prompt; the JSON to print, or None when the prompt is not ours."""
    invocation = ours(payload)
    if invocation is None:
        return None
    from loop.trust.person import typed_by_a_person

    if typed_by_a_person(env) is not None:
        return None  # an agent's prompt (a runner's agent, a nested session): nobody typed it
    cwd = payload.get("cwd")
    root = Path(
        env.get("CLAUDE_PROJECT_DIR") or (cwd if isinstance(cwd, str) and cwd else os.getcwd())
    ).resolve()
    name = invocation.command
    note: str | None = None
    try:
        if name == START and invocation.problem is not None:
            return {"decision": "block", "reason": _refusal(root, invocation)[:9000]}
        if name == START and (invocation.prompt or invocation.options):
            lines, note = _start(root, invocation)
        elif name == START:
            lines = _resume(root, payload)
        elif name == "loop-pause":
            lines = _steer(root, "pause", "paused from /loop-pause")
        elif name == "loop-cancel":
            lines = _steer(root, "stop", "cancelled from /loop-cancel")
        else:
            lines = _status(root)
    except LoopdeckError as exc:
        return {"decision": "block", "reason": f"/{name}: {exc}"[:9000]}
    except OSError as exc:
        return {
            "decision": "block",
            "reason": f"/{name}: {exc.strerror or exc} ({exc.filename or root})"[:9000],
        }
    out: dict[str, Any] = {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": f"loopdeck (/{name}) says:\n" + "\n".join(lines)[:9000],
        }
    }
    if note:
        out["systemMessage"] = note
    return out


def _refusal(root: Path, invocation: Invocation) -> str:
    if invocation.refused:
        names = ", ".join(invocation.refused)
        return (
            f"/orchestrator-loop: {names} can only be given in a terminal (a chat may carry pasted "
            "text, and these run or send something); nothing was started. Start the loop from a "
            f"terminal instead: {_terminal_command(root, invocation)}"
        )
    return f"/orchestrator-loop: {invocation.problem}; nothing was started"


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
